import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// CloudKit Web Services' private database: zones, records and the zone change feed, per signed-in user, container
/// and environment, checked through ``CloudKitWebAuthEmulator`` (API token, web auth token, rotation on every answer).
///
/// Faithful where a client can tell (api-facts B.3, B.4, B.6):
/// - `zones/modify` (create, delete; creating an existing zone answers `EXISTS` for it), `zones/list` (GET),
///   `zones/lookup`; the default zone `_defaultZone` always exists and cannot be deleted.
/// - `records/lookup` and `records/modify` with every operation type and `recordChangeTag`, one operation per record,
///   at most 200 operations or names a request (more is 400 `BAD_REQUEST`), per-record errors inside a 200 answer
///   (`NOT_FOUND`, `CONFLICT` for a stale tag, ``Configuration/existingRecordCode`` for a create of an existing
///   record, `BAD_REQUEST` for a record over 1 MB), `atomic` batches failing whole with `ATOMIC_ERROR` on the
///   bystanders; a missing zone is 404 `ZONE_NOT_FOUND`.
/// - `desiredKeys` on `records/lookup`, `records/modify` and `changes/zone` (a zone's own over the request's): the
///   records answered carry only the fields named (``Configuration/emptyDesiredKeys`` reads an empty list).
/// - `changes/zone` with `syncToken`, `resultsLimit` (at most 200), `moreComing` and tombstones (`deleted: true`);
///   a token from before ``expireChangeTokens(container:environment:zone:)`` or from a deleted zone is refused with
///   `BAD_REQUEST` whose reason names the sync token (the web services document no code of their own for it).
/// - `assets/upload` (at most 200 tokens) answering an upload URL per record field, good once for 15 minutes on the
///   emulator's clock; the bytes posted there (at most 50 MB) answered with the asset dictionary (`singleFile`), which
///   a `records/modify` field `{"type": "ASSET", "value": …}` then claims by its `receipt`. Records answer the field as
///   `ASSETID` with a `downloadURL` that serves the bytes; deleting or replacing the record or field frees the asset.
///   See `CloudKitDatabaseEmulator+Assets.swift`.
/// - Record types are made just in time in `development` only: `production` refuses a type nobody deployed
///   (``deploySchema(container:)``) with `BAD_REQUEST`, and a field whose type differs from the schema's.
/// - Error dictionaries carry `serverErrorCode`, `reason`, `uuid` and, for ``failNext(_:operation:status:code:reason:retryAfter:)``'s
///   throttling, `retryAfter`.
public final class CloudKitDatabaseEmulator: Sendable {
    /// How the database behaves.
    public struct Configuration: Sendable, Equatable {
        /// The code a `create` of an existing record gets: `EXISTS` as documented, or `CONFLICT` as the live
        /// service has been seen to answer.
        public var existingRecordCode = "EXISTS"
        /// The most operations (or names) a request takes.
        public var maxOperations = 200
        /// The largest record, in bytes of its field values.
        public var maxRecordBytes = 1_048_576
        /// How `records/lookup` and `records/modify` answer for a zone that does not exist: documented only by
        /// its code, so both readings are served.
        public var missingZone = MissingZoneAnswer.wholeRequest
        /// How `changes/zone` refuses an expired or foreign sync token: CloudKit Web Services documents no code of
        /// its own for it, so each plausible answer is served.
        public var expiredToken = ExpiredTokenAnswer.badRequest
        /// Whether records may live in `_defaultZone`: the private database allows it (without change tracking), so
        /// they are accepted unless a test asks for the stricter reading.
        public var defaultZoneRecords = DefaultZoneAnswer.accepted
        /// The largest asset, in bytes: 50 MB, the web services' limit of one Asset field (api-facts B.4).
        public var maxAssetBytes = 52_428_800
        /// The most tokens one `assets/upload` request takes (api-facts B.4).
        public var maxAssetTokens = 200
        /// How long an upload URL stays good, in milliseconds of the emulator's clock: 15 minutes (api-facts B.5).
        ///
        /// An asset no record claims within as long after its upload is freed.
        public var uploadURLLifetimeMs: Int64 = 15 * 60 * 1000
        /// How an empty `desiredKeys` list is read: the documentation says only the fields named are returned (so
        /// none), and that leaving the key out returns them all; a service reading `[]` as "left out" is plausible.
        public var emptyDesiredKeys = EmptyDesiredKeysAnswer.noFields
        /// The scheme of the upload and download URLs the emulator hands out; their host is the request's `Host`.
        ///
        /// A request's `X-Forwarded-Proto` header overrides it, and a request that came in over TLS gets `https`
        /// whatever it says.
        public var urlScheme = "http"

        /// The defaults.
        public init() {}
    }

    /// Readings of a missing zone's answer to record operations.
    public enum MissingZoneAnswer: String, Sendable, CaseIterable {
        /// 404 with `serverErrorCode` `ZONE_NOT_FOUND` for the request.
        case wholeRequest
        /// 200 with a `ZONE_NOT_FOUND` error in every record's slot.
        case perRecord
    }

    /// Readings of `desiredKeys: []` in `records/lookup`, `records/modify` and `changes/zone`.
    public enum EmptyDesiredKeysAnswer: String, Sendable, CaseIterable {
        /// Only the fields named come back: none.
        case noFields
        /// An empty list limits nothing: every field comes back, as with no `desiredKeys`.
        case allFields
    }

    /// Readings of an expired sync token's answer.
    public enum ExpiredTokenAnswer: String, Sendable, CaseIterable {
        /// `BAD_REQUEST` whose reason says the sync token is expired.
        case badRequest
        /// `CHANGE_TOKEN_EXPIRED`, the code Apple's native frameworks use.
        case changeTokenExpired
        /// `BAD_REQUEST` whose reason names the token with other words ("the continuation marker is no longer
        /// valid").
        case badRequestOtherWording
        /// `SYNC_TOKEN_EXPIRED`, the name some clients use for it.
        case syncTokenExpired
        /// `ZONE_NOT_FOUND` for a zone that exists, as if the token's zone were gone.
        case zoneNotFound
    }

    /// Readings of records in the default zone `_defaultZone`.
    public enum DefaultZoneAnswer: String, Sendable, CaseIterable {
        /// Records are kept there as in a custom zone (`changes/zone` still refuses it: no change tracking).
        case accepted
        /// Every records call naming it is refused with 400 `BAD_REQUEST`.
        case refused
    }

    /// What the database keeps across restarts.
    public struct SavedState: Sendable, Codable, Equatable {
        struct Record: Sendable, Codable, Equatable {
            var recordType: String
            /// The fields as JSON text (`{"value": {"value": "…", "type": "STRING"}}`).
            var fields: String
            var changeTag: String
            var sequence: Int64
            var deleted: Bool
            var createdMs: Int64
            var modifiedMs: Int64
        }

        struct Zone: Sendable, Codable, Equatable {
            /// Changes with each creation, so tokens of a deleted zone are refused by its successor.
            var incarnation: String
            var nextSequence: Int64 = 1
            /// Tokens below this sequence are expired.
            var tokenFloor: Int64 = 0
            var records: [String: Record] = [:]
        }

        struct Database: Sendable, Codable, Equatable {
            var zones: [String: Zone] = [:]
        }

        /// An upload URL handed out by `assets/upload` and not yet used.
        struct Upload: Sendable, Codable, Equatable {
            var database: String
            var zone: String
            var recordName: String
            var recordType: String
            var fieldName: String
            var expiresMs: Int64
        }

        /// Bytes received at an upload URL: unclaimed until a `records/modify` field names its receipt.
        struct Asset: Sendable, Codable, Equatable {
            var database: String
            var zone: String
            var recordName: String
            var fieldName: String
            /// Names the bytes in storage and in the download URL; never the receipt.
            var downloadID: String
            var size: Int64
            var fileChecksum: String
            var referenceChecksum: String
            var wrappingKey: String
            var uploadedMs: Int64
            var claimed = false
        }

        /// Databases by `container|environment|userRecordName`.
        var databases: [String: Database] = [:]
        /// Record types and their fields' types by `container|environment`.
        var schemas: [String: [String: [String: String]]] = [:]
        /// Unused upload URLs by the id their path ends with.
        var uploads: [String: Upload] = [:]
        /// Received assets by receipt.
        var assets: [String: Asset] = [:]

        /// Nothing stored.
        public init() {}

        /// A saved state; the keys added after the first release (`uploads`, `assets`) may be missing.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            databases = try container.decodeIfPresent([String: Database].self, forKey: .databases) ?? [:]
            schemas = try container.decodeIfPresent([String: [String: [String: String]]].self, forKey: .schemas) ?? [:]
            uploads = try container.decodeIfPresent([String: Upload].self, forKey: .uploads) ?? [:]
            assets = try container.decodeIfPresent([String: Asset].self, forKey: .assets) ?? [:]
        }
    }

    struct ScriptedFailure: Sendable {
        var operation: String?
        var remaining: Int
        var status: Int
        var code: String
        var reason: String
        var retryAfter: Int?
    }

    let webAuth: CloudKitWebAuthEmulator
    let clock: any StoreClock
    let configuration: Mutex<Configuration>
    let state = Mutex(SavedState())
    let failures = Mutex<[ScriptedFailure]>([])
    let recordFailures = Mutex<[String: (code: String, reason: String)]>([:])
    /// The assets' bytes: in memory until ``keepAssets(in:)`` names a directory.
    let assetBytes = CloudKitAssetBytes()
    /// Held while bytes are stored and registered, and while unreferenced bytes are freed, so a freeing pass never
    /// removes an upload that is being registered.
    let assetLock = Mutex(())

    /// A database checking calls with `webAuth`, its timestamps from `clock`.
    public init(
        webAuth: CloudKitWebAuthEmulator, configuration: Configuration = Configuration(),
        clock: any StoreClock = SystemClock()
    ) {
        self.webAuth = webAuth
        self.clock = clock
        self.configuration = Mutex(configuration)
    }

    /// Changes the configuration.
    public func configure(_ change: (inout Configuration) -> Void) { configuration.withLock { change(&$0) } }

    /// Adds the private database's routes to `server`.
    public func register(on server: LoopbackHTTPServer) {
        let base = "/database/1/{container}/{environment}/private/"
        let routes: [(String, String)] = [
            ("POST", "zones/modify"), ("GET", "zones/list"), ("POST", "zones/lookup"), ("POST", "records/lookup"),
            ("POST", "records/modify"), ("POST", "changes/zone"), ("POST", "assets/upload"),
        ]
        for (method, operation) in routes {
            server.route(HTTPRoutePattern(stringLiteral: "\(method) \(base)\(operation)")) { [self] request in
                handle(request, operation: operation)
            }
        }
        server.route(HTTPRoutePattern(stringLiteral: "POST \(Self.uploadPath){id}")) { [self] request in
            receiveUpload(request)
        }
        server.route(HTTPRoutePattern(stringLiteral: "GET \(Self.downloadPath){id}")) { [self] request in
            download(request)
        }
    }

    // MARK: Test hooks

    /// Every database and schema, for saving.
    public var savedState: SavedState { state.withLock { $0 } }

    /// Replaces everything with `saved`.
    public func restore(_ saved: SavedState) { state.withLock { $0 = saved } }

    /// Answers the next `count` calls of `operation` (`records/modify`; nil: any) with CloudKit's error dictionary.
    public func failNext(
        _ count: Int = 1, operation: String? = nil, status: Int, code: String, reason: String = "scripted failure",
        retryAfter: Int? = nil
    ) {
        failures.withLock {
            $0.append(
                ScriptedFailure(
                    operation: operation, remaining: count, status: status, code: code, reason: reason,
                    retryAfter: retryAfter))
        }
    }

    /// Makes every operation on the record `name` fail with `code` inside a 200 answer (nil: stop).
    public func failRecord(_ name: String, code: String?, reason: String = "scripted failure") {
        recordFailures.withLock { $0[name] = code.map { ($0, reason) } }
    }

    /// Refuses every sync token of `zone` issued so far, as CloudKit does once its change history is gone.
    public func expireChangeTokens(container: String, environment: String, zone: String) {
        state.withLock { state in
            for key in state.databases.keys where key.hasPrefix("\(container)|\(environment)|") {
                if var found = state.databases[key]?.zones[zone] {
                    found.tokenFloor = found.nextSequence
                    state.databases[key]?.zones[zone] = found
                }
            }
        }
    }

    /// Copies the development schema of `container` to production, as Dashboard's "Deploy Schema Changes".
    public func deploySchema(container: String) {
        state.withLock { state in
            let development = state.schemas["\(container)|development"] ?? [:]
            state.schemas["\(container)|production", default: [:]].merge(development) { $1 }
        }
    }

    /// The names of live records in `zone` of every user of `container` in `environment`.
    public func recordNames(container: String, environment: String, zone: String) -> [String] {
        state.withLock { state in
            state.databases.filter { $0.key.hasPrefix("\(container)|\(environment)|") }.values.flatMap { database in
                (database.zones[zone]?.records ?? [:]).filter { !$0.value.deleted }.keys
            }.sorted()
        }
    }

    // MARK: Handling

    typealias Answer = (status: Int, body: [String: Any])

    func handle(_ request: ReceivedRequest, operation: String) -> HTTPResponse {
        let container = request.captures["container"] ?? ""
        let environment = request.captures["environment"] ?? ""
        let grant: CloudKitWebAuthEmulator.Grant
        switch webAuth.check(request, container: container, environment: environment) {
        case .refused(let response): return response
        case .granted(let granted): grant = granted
        }
        if let failure = nextFailure(operation) {
            return grant.applying(
                to: CloudKitWebAuthEmulator.error(
                    failure.status, failure.code, failure.reason, retryAfter: failure.retryAfter))
        }
        let body: [String: Any]
        if request.method == "GET" {
            body = [:]
        } else {
            guard let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] else {
                return grant.applying(
                    to: CloudKitWebAuthEmulator.error(400, "BAD_REQUEST", "the request body is not a JSON object"))
            }
            body = object
        }
        let key = "\(container)|\(environment)|\(grant.userRecordName ?? "")"
        let configuration = configuration.withLock { $0 }
        let context = Context(
            database: key, schema: "\(container)|\(environment)", production: environment == "production",
            user: grant.userRecordName ?? "", now: clock.nowMilliseconds(), configuration: configuration,
            base: Self.base(of: request, scheme: configuration.urlScheme))
        let (status, data) = state.withLock { state -> (Int, Data) in
            let answer: Answer
            switch operation {
            case "zones/modify": answer = modifyZones(body, context, &state)
            case "zones/list": answer = listZones(context, state)
            case "zones/lookup": answer = lookupZones(body, context, state)
            case "records/lookup": answer = lookupRecords(body, context, state)
            case "records/modify": answer = modifyRecords(body, context, &state)
            case "assets/upload": answer = requestUploads(body, context, &state)
            default: answer = zoneChanges(body, context, state)
            }
            let data = (try? JSONSerialization.data(withJSONObject: answer.body, options: [.sortedKeys])) ?? Data()
            return (answer.status, data)
        }
        if ["zones/modify", "records/modify", "assets/upload"].contains(operation) { freeUnreferencedAssets() }
        return grant.applying(
            to: HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: data))
    }

    struct Context {
        let database: String
        let schema: String
        let production: Bool
        let user: String
        let now: Int64
        let configuration: Configuration
        /// `scheme://host[:port]` the request came in on, for the asset URLs.
        let base: String
    }

    func nextFailure(_ operation: String) -> ScriptedFailure? {
        failures.withLock { failures in
            guard let index = failures.firstIndex(where: { $0.operation == nil || $0.operation == operation })
            else { return nil }
            let failure = failures[index]
            failures[index].remaining -= 1
            if failures[index].remaining <= 0 { failures.remove(at: index) }
            return failure
        }
    }

    static func error(_ code: String, _ reason: String, extra: [String: Any] = [:]) -> [String: Any] {
        var object: [String: Any] = [
            "serverErrorCode": code, "reason": reason, "uuid": UUID().uuidString.lowercased(),
        ]
        object.merge(extra) { $1 }
        return object
    }

    static func zoneName(_ any: Any?) -> String? {
        ((any as? [String: Any])?["zoneName"] as? String).flatMap { $0.isEmpty ? nil : $0 }
    }

    func zoneID(_ name: String, _ context: Context) -> [String: Any] {
        ["zoneName": name, "ownerRecordName": context.user]
    }

    // MARK: Zones

    func modifyZones(_ body: [String: Any], _ context: Context, _ state: inout SavedState) -> Answer {
        guard let operations = body["operations"] as? [[String: Any]] else {
            return (400, Self.error("BAD_REQUEST", "zones/modify needs operations"))
        }
        var zones: [[String: Any]] = []
        for operation in operations {
            guard let name = Self.zoneName((operation["zone"] as? [String: Any])?["zoneID"]) else {
                zones.append(Self.error("BAD_REQUEST", "a zone operation needs zone.zoneID.zoneName"))
                continue
            }
            let existing = state.databases[context.database]?.zones[name]
            switch operation["operationType"] as? String {
            case "create":
                if existing != nil || name == "_defaultZone" {
                    zones.append(
                        Self.error("EXISTS", "zone \(name) already exists", extra: ["zoneID": zoneID(name, context)]))
                } else {
                    let incarnation = randomToken("", bytes: 6)
                    state.databases[context.database, default: .init()].zones[name] = .init(incarnation: incarnation)
                    zones.append(["zoneID": zoneID(name, context), "atomic": true])
                }
            case "delete":
                if name == "_defaultZone" {
                    zones.append(Self.error("BAD_REQUEST", "the default zone cannot be deleted"))
                } else if existing == nil {
                    zones.append(
                        Self.error(
                            "ZONE_NOT_FOUND", "zone \(name) does not exist", extra: ["zoneID": zoneID(name, context)]))
                } else {
                    state.databases[context.database]?.zones[name] = nil
                    state.assets = state.assets.filter {
                        $0.value.database != context.database || $0.value.zone != name
                    }
                    state.uploads = state.uploads.filter {
                        $0.value.database != context.database || $0.value.zone != name
                    }
                    zones.append(["zoneID": zoneID(name, context), "deleted": true])
                }
            default:
                zones.append(Self.error("BAD_REQUEST", "operationType must be create or delete"))
            }
        }
        return (200, ["zones": zones])
    }

    func listZones(_ context: Context, _ state: SavedState) -> Answer {
        let names = ["_defaultZone"] + (state.databases[context.database]?.zones.keys.sorted() ?? [])
        return (200, ["zones": names.map { ["zoneID": zoneID($0, context)] }])
    }

    func lookupZones(_ body: [String: Any], _ context: Context, _ state: SavedState) -> Answer {
        let requested = body["zones"] as? [Any] ?? []
        let zones: [[String: Any]] = requested.map { item in
            guard let name = Self.zoneName(item) else { return Self.error("BAD_REQUEST", "a zone needs a zoneName") }
            if name == "_defaultZone" || state.databases[context.database]?.zones[name] != nil {
                return ["zoneID": zoneID(name, context)]
            }
            return Self.error("ZONE_NOT_FOUND", "zone \(name) does not exist", extra: ["zoneID": zoneID(name, context)])
        }
        return (200, ["zones": zones])
    }
}
