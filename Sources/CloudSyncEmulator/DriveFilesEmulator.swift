import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// Google Drive's v3 API as a client of the `appDataFolder` sees it: `files` (list, create, get, `alt=media`,
/// update, delete), uploads (`multipart`, `media` and the resumable protocol), the batch endpoint, `about` and
/// `changes`, each call checked against ``GoogleOAuthEmulator``'s bearer tokens.
///
/// Faithful where a client can tell (api-facts part A):
/// - URL layout `/drive/v3/...`, `/upload/drive/v3/...`, `/batch/drive/v3`; Drive's error body
///   `{"error":{"code","message","errors":[{"domain","reason","message","location","locationType"}],"status"}}`.
/// - `fields` (`DriveFieldSelector`) cuts every JSON answer, batch parts and a resumable upload's last answer
///   included, to what it selects; without it an answer carries what Drive's does (`DriveResource.defaultFields`:
///   a file's `kind,id,name,mimeType`), and `about` refuses the call. A selector naming a field the answer does
///   not have, or malformed, is 400 `invalidParameter`.
/// - `files.list`: `q` (`DriveQuery`: `name`, `mimeType`, `trashed`, `in parents`, `modifiedTime`/`createdTime`
///   comparisons, `appProperties has {…}`, combined with `not`, `and`, `or` and parentheses), `spaces` (default
///   `drive`), `pageSize` (default 100, 1 to 1000, pages may come back shorter: ``Configuration/pageSizeCap``),
///   opaque `nextPageToken`s that ``expirePageTokens()`` makes rejected (400 `invalid`, location `pageToken`),
///   `orderBy` (`name`, `modifiedTime`, `createdTime`, each with `desc`; what `name` means is
///   ``Configuration/nameOrder``, bytes unless asked otherwise). Names compare as bytes.
/// - Names are not unique: two creates of one name make two files. Trashed files are listed unless `q` says
///   `trashed = false`.
/// - The app data folder has an id of its own per user (``appDataFolderID(of:)``), which answers carry in
///   `parents`; requests may name it so or by the alias `appDataFolder`. A file may not leave its space through
///   `addParents`/`removeParents` (403), and an update may not set `parents` (403 `fieldNotWritable`).
/// - Files carry `md5Checksum`, `sha1Checksum` and `sha256Checksum` (lowercase hex) unless they are a Google Docs
///   type; `alt=media` honours one `Range: bytes=…` (206 with `Content-Range`, 416 when it covers nothing).
/// - `files.generateIds` gives out ids (for `drive` or `appDataFolder`) that a create may then carry as `id`; an
///   id not given out is 400, one already used 409.
/// - Resumable uploads: `200` with the session URI in `Location`; `PUT` chunks with `Content-Range`; `308` with
///   `Range: bytes=0-N` until the last; `bytes */total` asks where the session is; every chunk but the last must be a
///   multiple of 256 KiB; an unknown or expired session (``expireUploadSessions()``) is `404`.
/// - Batch: `multipart/mixed` of `application/http` parts, at most 100, answered part by part with
///   `Content-ID: response-…`; media requests in a batch are refused.
/// - `about.get` needs `fields`; `storageQuota.limit` is absent when ``Configuration/storageLimitBytes`` is nil, and a
///   write past it is 403 `storageQuotaExceeded`. `user.permissionId` is stable per user.
/// - `changes`: a start page token, then the changes since, one per file (its latest), `removed` for deletes,
///   `newStartPageToken` on the last page.
///
/// Each user (the token's) has a Drive of their own. State is kept by ``savedState`` and ``restore(_:)``, but not
/// upload sessions: a restart expires them, as a week does at Google.
public final class DriveFilesEmulator: Sendable {
    /// How the emulator behaves.
    public struct Configuration: Sendable {
        /// The storage limit of every user, in bytes; nil for unlimited (no `limit` in `about`).
        public var storageLimitBytes: Int64?
        /// The largest page `files.list` returns whatever `pageSize` asks (pages may come back short); nil for none.
        public var pageSizeCap: Int?
        /// What `orderBy=name` means: Google documents it only as "alphabetical".
        public var nameOrder: NameOrder

        /// The defaults: unlimited storage, full pages, names in byte order.
        public init(storageLimitBytes: Int64? = nil, pageSizeCap: Int? = nil, nameOrder: NameOrder = .bytes) {
            self.storageLimitBytes = storageLimitBytes
            self.pageSizeCap = pageSizeCap
            self.nameOrder = nameOrder
        }
    }

    /// The readings of `orderBy=name` a client must survive.
    public enum NameOrder: String, Sendable, CaseIterable {
        /// By the names' UTF-8 bytes.
        case bytes
        /// Case-insensitively, as Drive's web interface sorts (`apple` beside `Apple`, before `Banana`).
        case caseInsensitive
        /// Each page's files in an order of their own (a very large folder, where Drive ignores `orderBy`); which
        /// files make up each page still follows the byte order.
        case shuffledWithinPage
    }

    /// The scopes any of which lets a token use this API.
    public static let scopes = [
        "https://www.googleapis.com/auth/drive.appdata", "https://www.googleapis.com/auth/drive",
        "https://www.googleapis.com/auth/drive.file",
    ]
    /// Chunks of a resumable upload, but the last, are multiples of this: 256 KiB.
    public static let chunkGranularity = 262_144
    /// The most calls one batch request may carry.
    public static let batchLimit = 100

    /// One stored file.
    public struct File: Sendable, Codable, Equatable {
        public var id: String
        public var name: String
        public var mimeType: String
        public var parents: [String]
        public var content: Data
        public var createdMs: Int64
        public var modifiedMs: Int64
        public var version: Int64
        public var trashed: Bool
        public var appProperties: [String: String]?
        /// The properties every app sees (`properties`); nil when none were ever set.
        public var properties: [String: String]? = nil

        var space: String { parents.contains("appDataFolder") ? "appDataFolder" : "drive" }
    }

    struct Change: Sendable, Codable, Equatable {
        var number: Int
        var fileID: String
        var removed: Bool
        var space: String
        var timeMs: Int64
    }

    struct Account: Sendable, Codable, Equatable {
        var files: [String: File] = [:]
        var changes: [Change] = []
        var nextChange = 1
        /// Ids `files.generateIds` gave out that no create has used yet, each with its space; nil when none
        /// (and in state saved before there were any).
        var generatedIDs: [String: String]? = nil
    }

    /// What the emulator keeps across restarts: every user's files and change log.
    public struct SavedState: Sendable, Codable, Equatable {
        var accounts: [String: Account] = [:]
        var nextFileNumber = 1

        /// No files.
        public init() {}
    }

    struct Session {
        var user: String
        var fileID: String?
        var metadata: [String: Any]
        var total: Int?
        var received: Data
        /// The parents an update's `addParents`/`removeParents` move the file to; nil to leave them.
        var parents: [String]?
        /// The `fields` of the request that started the session: the last chunk answers with them.
        var fields: String?
    }

    struct Volatile: @unchecked Sendable {
        var sessions: [String: Session] = [:]
        var pageTokenEpoch = 0
    }

    let oauth: GoogleOAuthEmulator
    let clock: any StoreClock
    let configuration: Mutex<Configuration>
    let state = Mutex(SavedState())
    let volatile = Mutex(Volatile())

    /// The API over `oauth`'s tokens, its times on `clock`.
    public init(
        oauth: GoogleOAuthEmulator, configuration: Configuration = Configuration(),
        clock: any StoreClock = SystemClock()
    ) {
        self.oauth = oauth
        self.clock = clock
        self.configuration = Mutex(configuration)
    }

    /// The storage limit from now on (nil: unlimited).
    public var storageLimitBytes: Int64? {
        get { configuration.withLock { $0.storageLimitBytes } }
        set { configuration.withLock { $0.storageLimitBytes = newValue } }
    }

    /// What `orderBy=name` means from now on.
    public var nameOrder: NameOrder {
        get { configuration.withLock { $0.nameOrder } }
        set { configuration.withLock { $0.nameOrder = newValue } }
    }

    /// The page cap from now on (nil: pages as asked).
    public var pageSizeCap: Int? {
        get { configuration.withLock { $0.pageSizeCap } }
        set { configuration.withLock { $0.pageSizeCap = newValue } }
    }

    /// Every file and change, for saving.
    public var savedState: SavedState { state.withLock { $0 } }

    /// Replaces every file and change with `saved`.
    public func restore(_ saved: SavedState) { state.withLock { $0 = saved } }

    /// Makes every page token issued so far rejected, as Google may after hours.
    public func expirePageTokens() { volatile.withLock { $0.pageTokenEpoch += 1 } }

    /// Forgets every upload session, so their URIs answer 404.
    public func expireUploadSessions() { volatile.withLock { $0.sessions.removeAll() } }

    /// `user`'s files, in no order (for tests to inspect).
    public func files(of user: String) -> [File] {
        state.withLock { Array(($0.accounts[user]?.files ?? [:]).values) }
    }

    /// Adds a file directly, as another device's client would have (for duplicates by name); returns its id.
    @discardableResult
    public func addFile(user: String, name: String, content: Data, parents: [String] = ["appDataFolder"]) -> String {
        store(user: user, id: nil, metadata: ["name": name, "parents": parents], content: content).id
    }

    /// The permission id of `user`: 20 digits derived from the address, stable across restarts.
    public static func permissionID(of user: String) -> String {
        let digest = SHA256.hash(Array(user.utf8))
        return digest.prefix(10).map { String(format: "%02d", Int($0) % 100) }.joined()
    }

    /// The id of `user`'s app data folder, which answers carry in `parents` where requests may say `appDataFolder`:
    /// stable across restarts.
    public static func appDataFolderID(of user: String) -> String {
        "0A" + String(sha256Hex("appDataFolder/\(user)").prefix(30))
    }

    // MARK: Routes

    /// Adds the API's routes to `server`.
    public func register(on server: LoopbackHTTPServer) {
        typealias Handler = @Sendable (DriveFilesEmulator, ReceivedRequest, String) -> HTTPResponse
        let routes: [(String, DriveResource?, Handler)] = [
            ("GET /drive/v3/files", .fileList, { $0.list($1, user: $2) }),
            ("POST /drive/v3/files", .file, { $0.create($1, user: $2, uploadType: nil) }),
            ("GET /drive/v3/files/generateIds", .generatedIDs, { $0.generateIDs($1, user: $2) }),
            ("GET /drive/v3/files/{id}", .file, { $0.get($1, user: $2) }),
            ("PATCH /drive/v3/files/{id}", .file, { $0.update($1, user: $2, uploadType: nil) }),
            ("DELETE /drive/v3/files/{id}", nil, { $0.delete($1, user: $2) }),
            ("POST /upload/drive/v3/files", .file, { $0.create($1, user: $2, uploadType: $1.formQuery("uploadType")) }),
            (
                "PATCH /upload/drive/v3/files/{id}", .file,
                { $0.update($1, user: $2, uploadType: $1.formQuery("uploadType")) }
            ),
            // The session's last chunk answers with the fields its first request asked for.
            ("PUT /upload/drive/v3/files", nil, { $0.chunk($1, user: $2) }),
            ("GET /drive/v3/about", .about, { $0.about($1, user: $2) }),
            ("GET /drive/v3/changes/startPageToken", .startPageToken, { $0.startPageToken($1, user: $2) }),
            ("GET /drive/v3/changes", .changeList, { $0.changes($1, user: $2) }),
        ]
        for (pattern, resource, handler) in routes {
            server.route(HTTPRoutePattern(stringLiteral: pattern)) { [self] request in
                authorized(request) { user in answer(request, as: resource) { handler(self, request, user) } }
            }
        }
        server.route("POST /batch/drive/v3") { [self] request in batch(request) }
    }

    /// `handler`'s answer cut to the `fields` the request asks for (or to what Drive answers without them).
    ///
    /// A selector Drive refuses is answered 400 before `handler` runs. A nil `resource` answers as `handler` does.
    func answer(_ request: ReceivedRequest, as resource: DriveResource?, _ handler: () -> HTTPResponse)
        -> HTTPResponse
    {
        guard let resource, request.formQuery("alt") != "media" else { return handler() }
        switch resource.selector(request.formQuery("fields")) {
        case .failure(let refusal): return refusal.response
        case .success(let selector): return DriveResource.cut(handler(), to: selector)
        }
    }

    func authorized(_ request: ReceivedRequest, _ body: (String) -> HTTPResponse) -> HTTPResponse {
        switch oauth.authorize(request) {
        case .refused(let response): return response
        case .granted(let grant):
            guard grant.scopes.contains(where: Self.scopes.contains) else {
                return Self.error(
                    403, "insufficientPermissions", "Request had insufficient authentication scopes.",
                    status: "PERMISSION_DENIED")
            }
            return body(grant.user)
        }
    }

    // MARK: Errors

    /// Drive's error body.
    static func error(
        _ code: Int, _ reason: String, _ message: String, domain: String = "global", location: String? = nil,
        locationType: String? = nil, status: String? = nil
    ) -> HTTPResponse {
        var item: [String: Any] = ["domain": domain, "reason": reason, "message": message]
        if let location {
            item["location"] = location
            item["locationType"] = locationType ?? "parameter"
        }
        let status =
            status
            ?? [400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"][code]
            ?? "UNKNOWN"
        return jsonResponse(["error": ["code": code, "message": message, "errors": [item], "status": status]], code)
    }

    static func notFound(_ id: String) -> HTTPResponse {
        error(404, "notFound", "File not found: \(id).", location: "fileId")
    }

    static func invalid(_ parameter: String, _ message: String) -> HTTPResponse {
        error(400, "invalid", message, location: parameter)
    }

    static func jsonResponse(_ object: Any, _ status: Int = 200) -> HTTPResponse {
        let body =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json; charset=UTF-8"], body: body)
    }
}
