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
/// - `files.list`: the `q` subset clients use (`name = '…'` with `\'` and `\\` escapes, `name != '…'`,
///   `name contains '…'`, `trashed = true|false`, `'appDataFolder' in parents`, joined by `and`), `spaces` (default
///   `drive`), `pageSize` (default 100, 1 to 1000, pages may come back shorter: ``Configuration/pageSizeCap``),
///   opaque `nextPageToken`s that ``expirePageTokens()`` makes rejected (400 `invalid`, location `pageToken`),
///   `orderBy` (`name`, `modifiedTime`, `createdTime`, each with `desc`; what `name` means is
///   ``Configuration/nameOrder``, bytes unless asked otherwise). Names compare as bytes. `fields` is accepted and
///   ignored: answers carry every field.
/// - Names are not unique: two creates of one name make two files. Trashed files are listed unless `q` says
///   `trashed = false`.
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
    }

    /// What the emulator keeps across restarts: every user's files and change log.
    public struct SavedState: Sendable, Codable, Equatable {
        var accounts: [String: Account] = [:]
        var nextFileNumber = 1

        /// No files.
        public init() {}
    }

    private struct Session {
        var user: String
        var fileID: String?
        var metadata: [String: Any]
        var total: Int?
        var received: Data
    }

    private struct Volatile: @unchecked Sendable {
        var sessions: [String: Session] = [:]
        var pageTokenEpoch = 0
    }

    private let oauth: GoogleOAuthEmulator
    private let clock: any StoreClock
    private let configuration: Mutex<Configuration>
    private let state = Mutex(SavedState())
    private let volatile = Mutex(Volatile())

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

    // MARK: Routes

    /// Adds the API's routes to `server`.
    public func register(on server: LoopbackHTTPServer) {
        let routes: [(String, @Sendable (DriveFilesEmulator, ReceivedRequest, String) -> HTTPResponse)] = [
            ("GET /drive/v3/files", { $0.list($1, user: $2) }),
            ("POST /drive/v3/files", { $0.create($1, user: $2, uploadType: nil) }),
            ("GET /drive/v3/files/{id}", { $0.get($1, user: $2) }),
            ("PATCH /drive/v3/files/{id}", { $0.update($1, user: $2, uploadType: nil) }),
            ("DELETE /drive/v3/files/{id}", { $0.delete($1, user: $2) }),
            ("POST /upload/drive/v3/files", { $0.create($1, user: $2, uploadType: $1.formQuery("uploadType")) }),
            ("PATCH /upload/drive/v3/files/{id}", { $0.update($1, user: $2, uploadType: $1.formQuery("uploadType")) }),
            ("PUT /upload/drive/v3/files", { $0.chunk($1, user: $2) }),
            ("GET /drive/v3/about", { $0.about($1, user: $2) }),
            ("GET /drive/v3/changes/startPageToken", { $0.startPageToken($1, user: $2) }),
            ("GET /drive/v3/changes", { $0.changes($1, user: $2) }),
        ]
        for (pattern, handler) in routes {
            server.route(HTTPRoutePattern(stringLiteral: pattern)) { [self] request in
                authorized(request) { handler(self, request, $0) }
            }
        }
        server.route("POST /batch/drive/v3") { [self] request in batch(request) }
    }

    private func authorized(_ request: ReceivedRequest, _ body: (String) -> HTTPResponse) -> HTTPResponse {
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

    private static func notFound(_ id: String) -> HTTPResponse {
        error(404, "notFound", "File not found: \(id).", location: "fileId")
    }

    private static func invalid(_ parameter: String, _ message: String) -> HTTPResponse {
        error(400, "invalid", message, location: parameter)
    }

    static func jsonResponse(_ object: Any, _ status: Int = 200) -> HTTPResponse {
        let body =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json; charset=UTF-8"], body: body)
    }

    // MARK: Files

    private func resource(_ file: File) -> [String: Any] {
        var object: [String: Any] = [
            "kind": "drive#file", "id": file.id, "name": file.name, "mimeType": file.mimeType,
            "parents": file.parents, "size": String(file.content.count), "version": String(file.version),
            "createdTime": Self.rfc3339(file.createdMs), "modifiedTime": Self.rfc3339(file.modifiedMs),
            "trashed": file.trashed, "spaces": [file.space],
            "sha256Checksum": Hex.encode(SHA256.hash(file.content)),
        ]
        if let properties = file.appProperties { object["appProperties"] = properties }
        return object
    }

    /// `2026-12-01T03:14:13.123Z`.
    static func rfc3339(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    private func list(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let spaces = Set((request.formQuery("spaces") ?? "drive").split(separator: ",").map(String.init))
        guard spaces.isSubset(of: ["drive", "appDataFolder"]) else {
            return Self.invalid("spaces", "Invalid Value")
        }
        var pageSize = 100
        if let text = request.formQuery("pageSize") {
            guard let number = Int(text), (1...1000).contains(number) else {
                return Self.invalid(
                    "pageSize", "Invalid value '\(text)'. Values must be within the range: [1, 1000]")
            }
            pageSize = number
        }
        if let cap = pageSizeCap { pageSize = min(pageSize, cap) }
        let filter: DriveQuery
        do {
            filter = try DriveQuery(request.formQuery("q") ?? "")
        } catch {
            return Self.invalid("q", "Invalid Value")
        }
        let orderBy = request.formQuery("orderBy") ?? "name"
        let nameOrder = self.nameOrder
        guard let order = Self.ordering(orderBy, names: nameOrder) else {
            return Self.invalid("orderBy", "Invalid Value")
        }
        let identity = "\(request.formQuery("q") ?? "")|\(spaces.sorted())|\(orderBy)"
        let epoch = volatile.withLock { $0.pageTokenEpoch }
        var offset = 0
        if let token = request.formQuery("pageToken") {
            guard let decoded = Self.decodePageToken(token), decoded.epoch == epoch,
                decoded.identity == sha256Hex(identity).prefix(16)
            else {
                return Self.invalid("pageToken", "Invalid Value")
            }
            offset = decoded.offset
        }
        let matching = state.withLock { state in
            Array((state.accounts[user]?.files ?? [:]).values)
        }.filter { spaces.contains($0.space) && filter.matches($0) }.sorted(by: order)
        var page = Array(matching.dropFirst(offset).prefix(pageSize))
        if nameOrder == .shuffledWithinPage {
            var random = SeededRandom(seed: UInt64(offset) &+ 0x5EED)
            page.shuffle(using: &random)
        }
        var body: [String: Any] = [
            "kind": "drive#fileList", "incompleteSearch": false, "files": page.map(resource),
        ]
        if offset + page.count < matching.count {
            body["nextPageToken"] = Self.encodePageToken(
                epoch: epoch, offset: offset + page.count, identity: String(sha256Hex(identity).prefix(16)))
        }
        return Self.jsonResponse(body)
    }

    private static func ordering(_ text: String, names: NameOrder) -> ((File, File) -> Bool)? {
        var keys: [(File, File) -> Int] = []
        for term in text.split(separator: ",") {
            let words = term.split(separator: " ")
            guard let field = words.first, words.count <= 2 else { return nil }
            let descending = words.count == 2 && words[1].lowercased() == "desc"
            if words.count == 2, !descending, words[1].lowercased() != "asc" { return nil }
            let compare: (File, File) -> Int
            switch field {
            case "name", "name_natural":
                compare =
                    names == .caseInsensitive
                    ? { a, b in
                        let folded = StoreKey.compareBytes(a.name.lowercased(), b.name.lowercased())
                        return folded != 0 ? folded : StoreKey.compareBytes(a.name, b.name)
                    } : { StoreKey.compareBytes($0.name, $1.name) }
            case "modifiedTime":
                compare = { $0.modifiedMs < $1.modifiedMs ? -1 : ($0.modifiedMs == $1.modifiedMs ? 0 : 1) }
            case "createdTime": compare = { $0.createdMs < $1.createdMs ? -1 : ($0.createdMs == $1.createdMs ? 0 : 1) }
            default: return nil
            }
            keys.append(descending ? { -compare($0, $1) } : compare)
        }
        return { a, b in
            for key in keys {
                let result = key(a, b)
                if result != 0 { return result < 0 }
            }
            return StoreKey.bytesPrecede(a.id, b.id)
        }
    }

    private static func encodePageToken(epoch: Int, offset: Int, identity: String) -> String {
        Base64URL.encode(Array("\(epoch):\(offset):\(identity)".utf8))
    }

    private static func decodePageToken(_ token: String) -> (epoch: Int, offset: Int, identity: Substring)? {
        guard let bytes = Base64URL.decode(token) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ":")
        guard parts.count == 3, let epoch = Int(parts[0]), let offset = Int(parts[1]) else { return nil }
        return (epoch, offset, parts[2])
    }

    private func get(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        guard let file = state.withLock({ $0.accounts[user]?.files[id] }) else { return Self.notFound(id) }
        guard request.formQuery("alt") == "media" else { return Self.jsonResponse(resource(file)) }
        return HTTPResponse(status: 200, headers: ["Content-Type": file.mimeType], body: file.content)
    }

    private func delete(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        let now = clock.nowMilliseconds()
        let removed = state.withLock { state -> Bool in
            guard let file = state.accounts[user]?.files.removeValue(forKey: id) else { return false }
            record(&state, user: user, fileID: id, removed: true, space: file.space, now: now)
            return true
        }
        return removed ? HTTPResponse(status: 204) : Self.notFound(id)
    }

    private func record(
        _ state: inout SavedState, user: String, fileID: String, removed: Bool, space: String, now: Int64
    ) {
        var account = state.accounts[user] ?? Account()
        account.changes.removeAll { $0.fileID == fileID }
        account.changes.append(
            Change(number: account.nextChange, fileID: fileID, removed: removed, space: space, timeMs: now))
        account.nextChange += 1
        state.accounts[user] = account
    }

    /// Creates (`id` nil) or replaces a file, with `content` when given; nil content keeps what is there.
    @discardableResult
    private func store(user: String, id: String?, metadata: [String: Any], content: Data?) -> File {
        let now = clock.nowMilliseconds()
        return state.withLock { state -> File in
            var account = state.accounts[user] ?? Account()
            var file: File
            if let id, let existing = account.files[id] {
                file = existing
                file.version += 1
            } else {
                let number = state.nextFileNumber
                state.nextFileNumber += 1
                let newID = "1" + String(sha256Hex("\(user)/\(number)").prefix(24)) + "\(number)"
                file = File(
                    id: newID, name: "Untitled", mimeType: "application/octet-stream", parents: ["root"],
                    content: Data(), createdMs: now, modifiedMs: now, version: 1, trashed: false, appProperties: nil)
                if let parents = metadata["parents"] as? [String], !parents.isEmpty { file.parents = parents }
            }
            if let name = metadata["name"] as? String { file.name = name }
            if let mimeType = metadata["mimeType"] as? String { file.mimeType = mimeType }
            if let trashed = metadata["trashed"] as? Bool { file.trashed = trashed }
            if let properties = metadata["appProperties"] as? [String: Any] {
                var merged = file.appProperties ?? [:]
                for (key, value) in properties {
                    merged[key] = value as? String
                }
                file.appProperties = merged
            }
            if let content { file.content = content }
            file.modifiedMs = now
            account.files[file.id] = file
            state.accounts[user] = account
            record(&state, user: user, fileID: file.id, removed: false, space: file.space, now: now)
            return file
        }
    }

    /// The 403 for a write that would take `user` past the storage limit, or nil.
    private func overLimit(user: String, replacing id: String?, newSize: Int) -> HTTPResponse? {
        guard let limit = storageLimitBytes else { return nil }
        let used = usage(of: user)
        let old = id.flatMap { id in state.withLock { $0.accounts[user]?.files[id]?.content.count } } ?? 0
        guard used - Int64(old) + Int64(newSize) > limit else { return nil }
        return Self.error(
            403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded.", domain: "usageLimits")
    }

    private func usage(of user: String) -> Int64 {
        state.withLock { state in
            (state.accounts[user]?.files ?? [:]).values.reduce(Int64(0)) { $0 + Int64($1.content.count) }
        }
    }

    private static func metadata(_ data: Data) -> [String: Any]? {
        if data.isEmpty { return [:] }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    private func create(_ request: ReceivedRequest, user: String, uploadType: String?) -> HTTPResponse {
        write(request, user: user, id: nil, uploadType: uploadType)
    }

    private func update(_ request: ReceivedRequest, user: String, uploadType: String?) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        guard state.withLock({ $0.accounts[user]?.files[id] }) != nil else { return Self.notFound(id) }
        return write(request, user: user, id: id, uploadType: uploadType)
    }

    private func write(_ request: ReceivedRequest, user: String, id: String?, uploadType: String?) -> HTTPResponse {
        let isUpload = request.path.hasPrefix("/upload/")
        var metadata: [String: Any] = [:]
        var content: Data?
        switch isUpload ? uploadType ?? "media" : nil {
        case nil:
            guard let parsed = Self.metadata(request.body) else {
                return Self.error(400, "parseError", "Parse Error")
            }
            metadata = parsed
        case "media"?:
            content = request.body
        case "multipart"?:
            guard let parts = MIMEMultipart.parse(request.body, contentType: request.headers["Content-Type"]),
                parts.count == 2, let parsed = Self.metadata(parts[0].body)
            else {
                return Self.error(
                    400, "badContent", "Bad multipart body: expected a JSON metadata part and a media part")
            }
            metadata = parsed
            if metadata["mimeType"] == nil, let type = parts[1].headers["Content-Type"] {
                metadata["mimeType"] = type
            }
            content = parts[1].body
        case "resumable"?:
            guard let parsed = Self.metadata(request.body) else {
                return Self.error(400, "parseError", "Parse Error")
            }
            if parsed["mimeType"] == nil, let type = request.headers["X-Upload-Content-Type"] {
                metadata["mimeType"] = type
            }
            metadata.merge(parsed) { $1 }
            let total = request.headers["X-Upload-Content-Length"].flatMap { Int($0) }
            let uploadID = randomToken("AEnB2U", bytes: 24)
            volatile.withLock {
                $0.sessions[uploadID] = Session(
                    user: user, fileID: id, metadata: metadata, total: total, received: Data())
            }
            let host = request.headers["Host"] ?? "127.0.0.1"
            let location = "http://\(host)/upload/drive/v3/files?uploadType=resumable&upload_id=\(uploadID)"
            return HTTPResponse(
                status: 200, headers: ["Location": location, "X-GUploader-UploadID": uploadID, "Content-Length": "0"])
        case let other?:
            return Self.invalid("uploadType", "Invalid value '\(other)' for uploadType")
        }
        if let content, let refused = overLimit(user: user, replacing: id, newSize: content.count) { return refused }
        return Self.jsonResponse(resource(store(user: user, id: id, metadata: metadata, content: content)))
    }

    private func chunk(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        guard let uploadID = request.formQuery("upload_id"),
            var session = volatile.withLock({ $0.sessions[uploadID] }), session.user == user
        else {
            return Self.error(404, "notFound", "Upload session not found or expired; start a new upload.")
        }
        let range = request.headers["Content-Range"] ?? "bytes */*"
        guard let parsed = Self.parseContentRange(range) else {
            return Self.error(400, "badRequest", "Invalid Content-Range: \(range)")
        }
        if let total = parsed.total {
            if let known = session.total, known != total {
                return Self.error(400, "badRequest", "Content-Range total \(total) differs from \(known)")
            }
            session.total = total
        }
        if let first = parsed.first {
            guard first <= session.received.count else {
                return Self.error(
                    400, "badRequest",
                    "Content-Range starts at \(first) but only \(session.received.count) bytes were received")
            }
            let isLast = session.total.map { first + request.body.count >= $0 } ?? false
            if !isLast, request.body.count % Self.chunkGranularity != 0 {
                return Self.error(
                    400, "badRequest",
                    "Invalid request. The number of bytes uploaded is required to be equal or greater than 262144, "
                        + "except for the final request (it's recommended to be the exact multiple of 262144).")
            }
            session.received = session.received.prefix(first) + request.body
        }
        if let total = session.total, session.received.count >= total {
            if session.received.count > total {
                return Self.error(400, "badRequest", "More bytes were sent than Content-Range announced")
            }
            if let refused = overLimit(user: user, replacing: session.fileID, newSize: total) {
                volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
                return refused
            }
            if let fileID = session.fileID, state.withLock({ $0.accounts[user]?.files[fileID] }) == nil {
                volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
                return Self.notFound(fileID)
            }
            let file = store(user: user, id: session.fileID, metadata: session.metadata, content: session.received)
            volatile.withLock { _ = $0.sessions.removeValue(forKey: uploadID) }
            return Self.jsonResponse(resource(file))
        }
        let stored = session
        volatile.withLock { $0.sessions[uploadID] = stored }
        var headers: HTTPHeaders = ["Content-Length": "0", "X-GUploader-UploadID": uploadID]
        if !session.received.isEmpty { headers["Range"] = "bytes=0-\(session.received.count - 1)" }
        return HTTPResponse(status: 308, headers: headers)
    }

    /// `bytes a-b/total`, `bytes */total`, `bytes a-b/*` or `bytes */*`.
    static func parseContentRange(_ text: String) -> (first: Int?, total: Int?)? {
        guard text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/")
        guard parts.count == 2 else { return nil }
        let total = parts[1] == "*" ? nil : Int(parts[1])
        if parts[1] != "*", total == nil { return nil }
        if parts[0] == "*" { return (nil, total) }
        let bounds = parts[0].split(separator: "-")
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), last >= first else {
            return nil
        }
        return (first, total)
    }

    // MARK: About and changes

    private func about(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        guard let fields = request.formQuery("fields"), !fields.isEmpty else {
            return Self.error(
                400, "required", "The 'fields' parameter is required for this method.", location: "fields")
        }
        _ = fields
        let used = usage(of: user)
        var quota: [String: Any] = [
            "usage": String(used), "usageInDrive": String(used), "usageInDriveTrash": "0",
        ]
        if let limit = storageLimitBytes { quota["limit"] = String(limit) }
        return Self.jsonResponse([
            "kind": "drive#about",
            "user": [
                "kind": "drive#user", "displayName": user.split(separator: "@").first.map(String.init) ?? user,
                "emailAddress": user, "permissionId": Self.permissionID(of: user), "me": true,
            ],
            "storageQuota": quota, "maxUploadSize": "5497558138880",
        ])
    }

    private func startPageToken(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        let next = state.withLock { $0.accounts[user]?.nextChange ?? 1 }
        return Self.jsonResponse(["kind": "drive#startPageToken", "startPageToken": String(next)])
    }

    private func changes(_ request: ReceivedRequest, user: String) -> HTTPResponse {
        guard let tokenText = request.formQuery("pageToken") else {
            return Self.error(400, "required", "Required parameter: pageToken", location: "pageToken")
        }
        guard let token = Int(tokenText), token >= 1 else { return Self.invalid("pageToken", "Invalid Value") }
        let spaces = Set((request.formQuery("spaces") ?? "drive").split(separator: ",").map(String.init))
        var pageSize = 100
        if let text = request.formQuery("pageSize") {
            guard let number = Int(text), (1...1000).contains(number) else {
                return Self.invalid("pageSize", "Invalid value '\(text)'. Values must be within the range: [1, 1000]")
            }
            pageSize = number
        }
        let includeRemoved = request.formQuery("includeRemoved") != "false"
        let (account, next) = state.withLock { state in
            (state.accounts[user] ?? Account(), state.accounts[user]?.nextChange ?? 1)
        }
        let pending = account.changes.filter {
            $0.number >= token && spaces.contains($0.space) && (includeRemoved || !$0.removed)
        }
        let page = pending.prefix(pageSize)
        var body: [String: Any] = [
            "kind": "drive#changeList",
            "changes": page.map { change -> [String: Any] in
                var object: [String: Any] = [
                    "kind": "drive#change", "changeType": "file", "fileId": change.fileID, "removed": change.removed,
                    "time": Self.rfc3339(change.timeMs),
                ]
                if !change.removed, let file = account.files[change.fileID] { object["file"] = resource(file) }
                return object
            },
        ]
        if pending.count > page.count, let following = pending.dropFirst(page.count).first {
            body["nextPageToken"] = String(following.number)
        } else {
            body["newStartPageToken"] = String(next)
        }
        return Self.jsonResponse(body)
    }

    // MARK: Batch

    private func batch(_ request: ReceivedRequest) -> HTTPResponse {
        guard let parts = MIMEMultipart.parse(request.body, contentType: request.headers["Content-Type"]) else {
            return Self.error(400, "badContent", "A batch request is multipart/mixed with a boundary")
        }
        guard parts.count <= Self.batchLimit else {
            return Self.error(
                400, "batchSizeTooLarge",
                "A batch request may contain at most \(Self.batchLimit) calls; this one has "
                    + "\(parts.count)")
        }
        let boundary = "batch_" + randomToken("", bytes: 12).replacingOccurrences(of: "-", with: "x")
        var body = Data()
        for part in parts {
            let answer = answerBatchPart(part, outer: request)
            // `<item1>` is answered as `<response-item1>`, as Google does.
            let contentID = part.headers["Content-ID"].map { id in
                id.hasPrefix("<") && id.hasSuffix(">") ? "<response-" + id.dropFirst() : "response-" + id
            }
            body += Data("--\(boundary)\r\nContent-Type: application/http\r\n".utf8)
            if let contentID { body += Data("Content-ID: \(contentID)\r\n".utf8) }
            body += Data("\r\nHTTP/1.1 \(answer.status) \(Self.reason(answer.status))\r\n".utf8)
            for field in answer.headers where field.name.lowercased() != "content-length" {
                body += Data("\(field.name): \(field.value)\r\n".utf8)
            }
            body += Data("Content-Length: \(answer.body.count)\r\n\r\n".utf8) + answer.body + Data("\r\n".utf8)
        }
        body += Data("--\(boundary)--\r\n".utf8)
        return HTTPResponse(status: 200, headers: ["Content-Type": "multipart/mixed; boundary=\(boundary)"], body: body)
    }

    private static func reason(_ status: Int) -> String {
        [200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"][
            status] ?? "Status"
    }

    private func answerBatchPart(_ part: MIMEMultipart.Part, outer: ReceivedRequest) -> HTTPResponse {
        guard let inner = Self.parseInnerRequest(part.body) else {
            return Self.error(400, "badRequest", "A batch part is not an HTTP request")
        }
        var request = inner
        if request.headers["Authorization"] == nil, let outerAuthorization = outer.headers["Authorization"] {
            request.headers["Authorization"] = outerAuthorization
        }
        request.headers["Host"] = outer.headers["Host"]
        if request.path.hasPrefix("/upload/") || request.formQuery("alt") == "media" {
            return Self.error(400, "badRequest", "Media requests cannot be used in a batch request.")
        }
        let segments = request.path.split(separator: "/").map(String.init)
        guard segments.count >= 3, segments[0] == "drive", segments[1] == "v3" else {
            return Self.error(404, "notFound", "Not Found")
        }
        return authorized(request) { user in
            switch (request.method, Array(segments.dropFirst(2))) {
            case ("GET", ["files"]): return list(request, user: user)
            case ("POST", ["files"]): return create(request, user: user, uploadType: nil)
            case ("GET", let path) where path.count == 2 && path[0] == "files":
                request.captures["id"] = path[1].removingPercentEncoding ?? path[1]
                return get(request, user: user)
            case ("PATCH", let path) where path.count == 2 && path[0] == "files":
                request.captures["id"] = path[1].removingPercentEncoding ?? path[1]
                return update(request, user: user, uploadType: nil)
            case ("DELETE", let path) where path.count == 2 && path[0] == "files":
                request.captures["id"] = path[1].removingPercentEncoding ?? path[1]
                return delete(request, user: user)
            case ("GET", ["about"]): return about(request, user: user)
            default: return Self.error(404, "notFound", "Not Found")
            }
        }
    }

    /// `METHOD /path?query HTTP/1.1`, headers, a blank line and a body.
    static func parseInnerRequest(_ data: Data) -> ReceivedRequest? {
        guard let head = MIMEMultipart.splitHead(data) else { return nil }
        var lines = head.lines
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var target = String(requestLine[1])
        if let url = URL(string: target), url.scheme != nil {
            target = url.path + (url.query.map { "?" + $0 } ?? "")
        }
        let pieces = target.split(separator: "?", maxSplits: 1).map(String.init)
        let query = pieces.count > 1 ? URLComponents(string: "?" + pieces[1])?.queryItems ?? [] : []
        var request = ReceivedRequest(
            method: String(requestLine[0]).uppercased(), path: pieces[0], queryItems: query,
            headers: MIMEMultipart.headers(lines), body: head.body)
        request.rawQuery = pieces.count > 1 ? pieces[1] : ""
        return request
    }
}

/// The subset of Drive's search language clients of the app data folder use: terms joined by `and`.
struct DriveQuery {
    enum Term {
        case name(String, String)  // operator, value
        case trashed(Bool)
        case inParents(String)
    }

    struct ParseError: Error {}

    let terms: [Term]

    init(_ text: String) throws {
        var tokens = try Self.tokenize(text)
        var terms: [Term] = []
        while !tokens.isEmpty {
            if !terms.isEmpty {
                guard tokens.removeFirst().lowercased() == "and" else { throw ParseError() }
            }
            guard tokens.count >= 3 else { throw ParseError() }
            let (a, op, b) = (tokens[0], tokens[1], tokens[2])
            tokens.removeFirst(3)
            if a == "name", ["=", "!=", "contains"].contains(op), let value = Self.literal(b) {
                terms.append(.name(op, value))
            } else if a == "trashed", op == "=", b == "true" || b == "false" {
                terms.append(.trashed(b == "true"))
            } else if let value = Self.literal(a), op == "in", b == "parents" {
                terms.append(.inParents(value))
            } else {
                throw ParseError()
            }
        }
        self.terms = terms
    }

    func matches(_ file: DriveFilesEmulator.File) -> Bool {
        terms.allSatisfy { term in
            switch term {
            // Names compare as bytes, as Drive's do.
            case .name("=", let value): return StoreKey.bytesEqual(file.name, value)
            case .name("!=", let value): return !StoreKey.bytesEqual(file.name, value)
            case .name(_, let value): return file.name.utf8.starts(with: value.utf8)
            case .trashed(let trashed): return file.trashed == trashed
            case .inParents(let parent): return file.parents.contains(parent)
            }
        }
    }

    /// A quoted token's value with `\'` and `\\` unescaped; nil for an unquoted one.
    private static func literal(_ token: String) -> String? {
        guard token.hasPrefix("'"), token.hasSuffix("'"), token.count >= 2 else { return nil }
        var value = ""
        var escaped = false
        for character in token.dropFirst().dropLast() {
            if escaped {
                value.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                value.append(character)
            }
        }
        return value
    }

    private static func tokenize(_ text: String) throws -> [String] {
        var tokens: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        func flush() {
            if !current.isEmpty { tokens.append(current) }
            current = ""
        }
        for character in text {
            if quoted {
                current.append(character)
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "'" {
                    quoted = false
                    flush()
                }
            } else if character == "'" {
                flush()
                quoted = true
                current.append(character)
            } else if character == " " || character == "\t" || character == "\n" {
                flush()
            } else if character == "=" || character == "!" {
                if character == "=", current == "!" {
                    current = "!="
                    flush()
                } else {
                    flush()
                    current = String(character)
                    if character == "=" { flush() }
                }
            } else {
                if current == "!" { throw ParseError() }
                current.append(character)
            }
        }
        if quoted { throw ParseError() }
        flush()
        return tokens
    }
}
