import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// One CloudKit record per key in a custom zone of the signed-in user's private database, over ``CloudKitBridge``:
/// record name = the key, the (encoded) value in one STRING field.
///
/// Reads are `records/lookup` and writes `records/modify` with `forceReplace`, removes `forceDelete`, each 200 keys a
/// request, per-record errors reported in their keys' slots; listing walks `changes/zone` from no token, its sync
/// token the cursor, skipping tombstones. A missing zone (`ZONE_NOT_FOUND`) is created and the request sent once more.
/// CloudKit has no usage endpoint, so ``quota()`` is nil; it has no change events here (``subscribeToRemoteChanges(_:)``
/// is nil), and its identity is the user record name: every `users/caller` answer (each availability probe, each
/// ``accountIdentity()``) is compared with the last one, and another user, or nobody signed in, is an account event
/// with `identityChanged`, as the Drive provider reports a changed `permissionId`.
public final class CloudKitProvider: Provider {
    /// The provider's id in the store.
    public let id: String
    /// A record-tier provider capped at `recordMaxBytes`, with CloudKit's record-name rules, 200 keys a batch.
    public let capabilities: ProviderCapabilities
    /// The bridge it sends through.
    public let bridge: CloudKitBridge
    /// The record type of its records.
    public let recordType: String
    /// The STRING field holding the value.
    public let field: String
    /// The Asset field holding a file stored under a key (``putFile(_:from:size:)``).
    public let fileField: String
    private let readOnly: Bool
    private let closed = Mutex(false)
    /// The last user record name `users/caller` answered, and whether that user was signed out since; kept across
    /// `clearCaches()`, which another provider's account event may cause.
    private let identity = Mutex<(user: String?, signedOut: Bool)>((nil, false))
    private let accountListeners = Subscribers<AccountEvent>()
    /// The command that signs this provider in, for messages.
    private let loginCommand: String

    /// A provider on `bridge`'s zone, its records of `recordType` holding the value in `field`, or a file in the
    /// Asset field `fileField`.
    public init(
        id: String, bridge: CloudKitBridge, recordType: String = "CloudSyncItem", field: String = "value",
        fileField: String = "file", recordMaxBytes: Int = 921_600, readOnly: Bool = false, loginCommand: String? = nil
    ) {
        self.fileField = fileField
        self.id = id
        self.loginCommand = loginCommand ?? "cloudsync login FILE --provider \(id)"
        self.bridge = bridge
        self.recordType = recordType
        self.field = field
        self.readOnly = readOnly
        capabilities = Self.capabilities(recordMaxBytes: recordMaxBytes)
    }

    /// What a provider capped at `recordMaxBytes` can do; known before it is made.
    public static func capabilities(recordMaxBytes: Int) -> ProviderCapabilities {
        ProviderCapabilities(
            maxValueBytes: recordMaxBytes, tier: .record, keyRules: KeyRule.cloudKitRecordName,
            batchLimit: CloudKitBridge.maxOperationsPerRequest, canList: true, reportsQuota: false,
            emitsAccountEvents: true, conditionalWrites: true)
    }

    var zoneDescription: String {
        let configuration = bridge.configuration
        return "zone \(configuration.zoneName) of \(configuration.container) (\(configuration.environment))"
    }

    func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(.closed, "the cloudKit provider \(id) was closed; make a new one", provider: id)
        }
    }

    func ensureWritable() throws(CloudSyncError) {
        try ensureOpen()
        if readOnly {
            throw CloudSyncError(
                .unsupported, "the cloudKit provider \(id) is read-only here (a dry run); nothing was changed",
                provider: id)
        }
    }

    /// Stops serving; later calls fail with `ERR_CLOSED`.
    public func close() async {
        closed.withLock { $0 = true }
        bridge.close()
    }

    /// Nothing is cached about the account but the user it was last seen as, which stays, so an account change after
    /// another provider's is still noticed.
    public func clearCaches() async {}

    /// Calls `handler` when `users/caller` names another user than before, or nobody.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    {
        accountListeners.add(handler)
    }

    /// Remembers who `users/caller` answered (nil: nobody signed in) and tells subscribers when that changed.
    ///
    /// The first answer is only remembered. Another user is an event; so is nobody (reported once); the same user
    /// again after a sign-out is not, since the sign-out was reported.
    private func noteCaller(_ user: String?) {
        let event = identity.withLock { known -> AccountEvent? in
            let previous = known.user
            let wasSignedOut = known.signedOut
            if let user { known = (user, false) } else { known.signedOut = true }
            guard let previous else { return nil }
            if let user {
                guard user != previous else { return nil }
                return AccountEvent(
                    identityChanged: true, status: .available, provider: id, eventID: "cloudKit:\(id):\(user)")
            }
            guard !wasSignedOut else { return nil }
            return AccountEvent(
                identityChanged: true, status: .noAccount, provider: id,
                eventID: "cloudKit:\(id):signedOut:\(previous)")
        }
        if let event { accountListeners.notify(event) }
    }

    /// Available when `users/caller` names a user; otherwise why not: `signedOut` (naming `cloudsync login`),
    /// `misconfigured` (API token, container or environment refused), `offline`, `timedOut`.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) { return .unavailable(.closed, "the cloudKit provider \(id) was closed") }
        do {
            noteCaller(try await bridge.userRecordID())
            return .available
        } catch {
            let mapped = map(error)
            if mapped.code == .notSignedIn { noteCaller(nil) }
            return Availability(probeFailure: mapped)
        }
    }

    /// The signed-in user's record name, stable per iCloud account and container, asked of `users/caller` each time.
    public func accountIdentity() async throws -> String? {
        try ensureOpen()
        do {
            let user = try await bridge.userRecordID()
            noteCaller(user)
            return user
        } catch {
            let mapped = map(error)
            if mapped.code == .notSignedIn { noteCaller(nil) }
            throw mapped
        }
    }

    /// CloudKit has no usage endpoint, so nothing is reported rather than a guess.
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        return nil
    }

    // MARK: Reads and writes

    /// `records/lookup`, 200 keys a request; nil for a record that does not exist.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try await getVersioned(keys).map { read in read.map { $0?.value } }
    }

    /// ``get(_:)`` with each record's `recordChangeTag`, the tag listings give and conditional changes name.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try ensureOpen()
        let found: [Result<CloudKitRecord?, CloudKitError>]
        do {
            found = try await inZone(creating: !readOnly) { () async throws(CloudKitError) in
                try await self.bridge.lookup(keys)
            }
        } catch let error where error.code == .zoneNotFound && readOnly {
            return keys.map { _ in .success(nil) }
        } catch {
            throw map(error)
        }
        return zip(keys, found).map { key, result in
            switch result {
            case .failure(let error): return .failure(map(error, key: key))
            case .success(nil): return .success(nil)
            case .success(let record?):
                guard case .string(let value) = record.fields[field] else {
                    if record.fields[fileField]?.assetValue != nil {
                        return .failure(
                            CloudSyncError(
                                .decode,
                                "the record \(key) in the \(zoneDescription) holds a file (its Asset field "
                                    + "`\(fileField)`), not a value; read it with getFile",
                                provider: id, key: key))
                    }
                    return .failure(
                        CloudSyncError(
                            .decode,
                            "the record \(key) in the \(zoneDescription) has no STRING field `\(field)` (its type is "
                                + "\(record.recordType)); it was not written by CloudSync",
                            provider: id, key: key))
                }
                return .success(VersionedValue(value, version: record.recordChangeTag))
            }
        }
    }

    /// `records/modify` with `forceReplace`, 200 items a request; a value over `recordMaxBytes` is refused in its
    /// slot with `ERR_PAYLOAD_TOO_LARGE` and never sent.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try await set(items, conditions: items.map { _ in nil }).map { $0.map { _ in () } }
    }

    /// ``set(_:)`` with each write's condition checked by CloudKit.
    ///
    /// `create` for a key that must be absent, `replace` with the record change tag for one that must hold a version,
    /// `forceReplace` for none. A condition that does not hold (`CONFLICT`, `EXISTS`, or `NOT_FOUND` for a record deleted since) fails with `ERR_CHANGED_SINCE_READ`.
    /// Each success carries the saved record's new change tag.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        try ensureWritable()
        let cap = capabilities.maxValueBytes ?? Int.max
        let fitting = items.indices.filter { items[$0].value.utf8.count <= cap }
        let operations = fitting.map { index in
            let item = items[index]
            var record = CloudKitRecord(
                recordName: item.key, recordType: recordType, fields: [field: .string(item.value)])
            switch conditions[index] {
            case nil: return CloudKitOperation(.forceReplace, record)
            case .absent?: return CloudKitOperation(.create, record)
            case .version(let tag)?:
                record.recordChangeTag = tag
                return CloudKitOperation(.replace, record)
            }
        }
        let sent =
            operations.isEmpty
            ? []
            : try await run(operations, keys: fitting.map { items[$0].key }, conditions: fitting.map { conditions[$0] })
        var results = sent.makeIterator()
        return items.map { item in
            guard item.value.utf8.count <= cap else {
                return .failure(
                    CloudSyncError(
                        .payloadTooLarge,
                        "the value is \(item.value.utf8.count) bytes; the cloudKit provider \(id) takes at most \(cap) "
                            + "(recordMaxBytes); list a larger provider after it",
                        provider: id, key: item.key))
            }
            return results.next().map { $0.map { $0?.recordChangeTag } }
                ?? .failure(CloudSyncError(.provider, "no result", provider: id, key: item.key))
        }
    }

    /// `records/modify` with `forceDelete`, 200 keys a request; removing a missing key succeeds.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await remove(keys, conditions: keys.map { _ in nil })
    }

    /// ``remove(_:)`` with each removal's condition: `delete` with the record change tag for a key that must hold a
    /// version (`CONFLICT` fails it with `ERR_CHANGED_SINCE_READ`; a record already gone is removed), `forceDelete`
    /// for none; a key that must be absent is looked up, and fails that way if it exists.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try ensureWritable()
        var results = [Result<Void, CloudSyncError>?](repeating: nil, count: keys.count)
        // Removing a key on the condition that it is absent changes nothing either way: only whether it is, is asked.
        let mustBeAbsent = keys.indices.filter { conditions[$0] == .absent }
        if !mustBeAbsent.isEmpty {
            let reads = try await get(mustBeAbsent.map { keys[$0] })
            for (index, read) in zip(mustBeAbsent, reads) {
                results[index] = read.flatMap { stored in
                    stored == nil ? .success(()) : .failure(WriteCondition.absent.unmet(key: keys[index], provider: id))
                }
            }
        }
        let sending = keys.indices.filter { results[$0] == nil }
        let operations = sending.map { index in
            var record = CloudKitRecord(recordName: keys[index], recordType: recordType)
            guard case .version(let tag)? = conditions[index] else { return CloudKitOperation(.forceDelete, record) }
            record.recordChangeTag = tag
            return CloudKitOperation(.delete, record)
        }
        if !operations.isEmpty {
            let sent = try await run(
                operations, keys: sending.map { keys[$0] }, conditions: sending.map { conditions[$0] },
                missingIsFine: true)
            for (index, result) in zip(sending, sent) { results[index] = result.map { _ in () } }
        }
        return results.map { $0! }
    }

    /// Runs `operations` (one per key, sent under `conditions`); each outcome is the record as saved, nil for a delete.
    ///
    /// A conditional operation CloudKit refused because the record is not as the condition said fails with
    /// `ERR_CHANGED_SINCE_READ`; with `missingIsFine`, a record that does not exist is a success (a removal).
    private func run(
        _ operations: [CloudKitOperation], keys: [String], conditions: [WriteCondition?], missingIsFine: Bool = false
    ) async throws(CloudSyncError) -> [Result<CloudKitRecord?, CloudSyncError>] {
        let results: [Result<CloudKitRecord?, CloudKitError>]
        do {
            results = try await inZone(creating: true) { () async throws(CloudKitError) in
                // Only each record's new change tag is used: no value need come back.
                try await self.bridge.modify(operations, echoingFields: false)
            }
        } catch {
            throw map(error)
        }
        return keys.indices.map { index in
            let key = keys[index]
            switch results[index] {
            case .success(let record): return .success(record)
            case .failure(let error) where missingIsFine && error.serverErrorCode == "NOT_FOUND": return .success(nil)
            case .failure(let error):
                if let condition = conditions[index],
                    ["CONFLICT", "EXISTS", "NOT_FOUND"].contains(error.serverErrorCode ?? "")
                {
                    return .failure(condition.unmet(key: key, provider: id))
                }
                return .failure(map(error, key: key))
            }
        }
    }

    /// Runs `body`; when the zone is missing, creates it (if `creating`) and runs `body` once more.
    ///
    /// A missing zone is told either way CloudKit may tell it: `ZONE_NOT_FOUND` for the request, or a 200 whose every
    /// record carries `ZONE_NOT_FOUND` (thrown here as the zone's error, so a read-only caller reads nothing).
    func inZone<T>(
        creating: Bool, _ body: () async throws(CloudKitError) -> [Result<T, CloudKitError>]
    ) async throws(CloudKitError) -> [Result<T, CloudKitError>] {
        func missingZone(_ results: [Result<T, CloudKitError>]) -> CloudKitError? {
            var first: CloudKitError?
            for result in results {
                guard case .failure(let error) = result, error.code == .zoneNotFound else { return nil }
                first = first ?? error
            }
            return first
        }
        var missing: CloudKitError
        do throws(CloudKitError) {
            let results = try await body()
            guard let zoneError = missingZone(results) else { return results }
            missing = zoneError
        } catch {
            guard error.code == .zoneNotFound else { throw error }
            missing = error
        }
        guard creating else { throw missing }
        try await bridge.ensureZone()
        let results = try await body()
        if let zoneError = missingZone(results) { throw zoneError }
        return results
    }

    // MARK: Listing

    /// One `changes/zone` page of at most `limit` records (200 at most) after the cursor (a sync token), tombstones
    /// skipped; a missing zone lists nothing.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        do {
            // Names and change tags only: no value is asked for (a page of 200 large records would bring them all).
            let page = try await bridge.fetchChangesPage(since: cursor, limit: max(1, limit), desiredKeys: [])
            // A record's change tag is new after every save, by anyone.
            return KeyPage(
                keys: page.records.map(\.recordName), nextCursor: page.moreComing ? page.syncToken : nil,
                versions: page.records.map(\.recordChangeTag))
        } catch  where error.code == .zoneNotFound && cursor == nil {
            return KeyPage(keys: [], nextCursor: nil)
        } catch  where error.code == .tokenExpired {
            throw CloudSyncError(
                .provider, "the listing's cursor of the \(zoneDescription) expired; start the listing again",
                provider: id)
        } catch {
            throw map(error)
        }
    }

    // MARK: Change feed

    /// The zone's sync token after its last change, found by walking `changes/zone` to its end; nil while the zone
    /// does not exist.
    public func changeFeedCursor() async throws -> String? {
        try ensureOpen()
        var token: String?
        while true {
            let page: CloudKitChangesPage
            do throws(CloudKitError) {
                page = try await bridge.fetchChangesPage(since: token, limit: 200, desiredKeys: [])
            } catch  where error.code == .zoneNotFound {
                return nil
            } catch {
                throw map(error)
            }
            let next = page.syncToken ?? token
            guard page.moreComing else { return next }
            guard next != token else {
                throw CloudSyncError(
                    .provider, "changes/zone of the \(zoneDescription) kept answering moreComing with the same token",
                    provider: id)
            }
            token = next
        }
    }

    /// One `changes/zone` page after `cursor` (a sync token): changed records and tombstones, by record name; an
    /// expired token (or a zone that is gone) answers expired.
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        try ensureOpen()
        do {
            let page = try await bridge.fetchChangesPage(
                since: cursor, limit: min(200, max(1, limit)), desiredKeys: [])
            let changes =
                page.records.map { KeyChange(key: $0.recordName, removed: false) }
                + page.deletedRecordNames.map { KeyChange(key: $0, removed: true) }
            return .changes(ChangePage(changes: changes, cursor: page.syncToken ?? cursor, hasMore: page.moreComing))
        } catch  where error.code == .tokenExpired {
            return .expired("CloudKit refused the sync token: the zone's change history no longer reaches it")
        } catch  where error.code == .zoneNotFound {
            return .expired("the \(zoneDescription) no longer exists")
        } catch {
            throw map(error)
        }
    }

    // MARK: Errors

    /// The store's error for a bridge error: per-record errors name `key`.
    func map(_ error: CloudKitError, key: String? = nil) -> CloudSyncError {
        let login = "run `\(loginCommand)` to sign in to \(bridge.configuration.container)"
        let code: ErrorCode
        var message = error.text
        switch error.serverErrorCode {
        case "AUTHENTICATION_REQUIRED":
            code = .notSignedIn
            message += "; \(login)"
        case "AUTHENTICATION_FAILED", "ACCESS_DENIED":
            code = .containerMisconfigured
            message += "; check `apiToken`, `container` and `environment`"
        // THROTTLED (429) and TRY_AGAIN_LATER (503) both ask for a wait.
        case "THROTTLED", "TRY_AGAIN_LATER": code = .rateLimited
        case "QUOTA_EXCEEDED": code = .quotaExceeded
        case "ZONE_NOT_FOUND": code = .containerMisconfigured
        case "INTERNAL_ERROR":
            // CloudKit's nonrecoverable error: queued, it would fail again every time the outbox tried it.
            code = .provider
            message += "; CloudKit calls this error nonrecoverable, so it is not retried: report it with the key"
        case "BAD_REQUEST":
            let reason = error.reason?.lowercased() ?? ""
            if ["container", "zone", "type", "schema", "environment"].contains(where: reason.contains) {
                code = .containerMisconfigured
                message +=
                    "; check `container`, `environment`, `zone`, `recordType` and `field` (and deploy the schema "
                    + "to production)"
            } else if reason.contains("too large") {
                code = .payloadTooLarge
            } else {
                code = .provider
            }
        default:
            if let underlying = error.underlying {
                code = underlying.code
            } else if error.code == .notAuthenticated {
                code = .notSignedIn
                message += "; \(login)"
            } else {
                code = .provider
            }
        }
        // What CloudKit said, as fields; for a failure below CloudKit (offline, gave up retrying), the HTTP layer's.
        let context =
            error.serverErrorCode == nil && error.httpStatus == nil
            ? error.underlying?.context
            : ErrorContext(
                httpStatus: error.httpStatus, serviceCode: error.serverErrorCode, serviceReason: error.reason)
        return CloudSyncError(
            code, message, provider: id, key: key ?? error.recordName,
            retryAfterMs: error.retryAfterMs ?? error.underlying?.retryAfterMs, context: context)
    }
}
