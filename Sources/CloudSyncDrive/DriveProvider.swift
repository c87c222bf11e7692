import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// One file per key in a Google account's Drive `appDataFolder`: the file's `name` is the key exactly, its content
/// the (encoded) value's bytes.
///
/// - Reads are `alt=media` downloads, several at once up to `maxConcurrency`; Drive has no batch read, so one request
///   per key.
/// - Writes are one multipart upload (create) or one media upload (update of a known key) for values up to
///   ``resumableThreshold``; larger values go up resumably in ``chunkSize`` chunks, resuming from the server's
///   `Range` after an interruption and starting again when the session is gone (404).
/// - Removes are `DELETE`s, sent through Drive's batch endpoint, 100 a request, when there are several.
/// - A name → file-id cache saves the lookups; `clearCaches()` forgets it. A batch of uncached keys is resolved by
///   one paged listing when that costs fewer requests than one search per key; for ``listingTrust`` after a listing,
///   writes take a name it did not find as new without asking again. A cached id that answers 404 is dropped and
///   looked up once more.
/// - Names are not unique in Drive: when several files carry a key's name, reads use the newest `modifiedTime`,
///   writes update that one and delete the others, and ``duplicatesResolved`` counts them.
/// - ``quota()`` and ``accountIdentity()`` come from `about.get`; the identity is the user's `permissionId`, and a
///   different one than the state database remembers is an account event with `identityChanged`.
/// - ``changes(since:)`` reads Drive's change feed for the app data folder; with a ``changePollInterval`` a
///   remote-change subscription polls it.
public final class DriveProvider: Provider {
    /// Values with more bytes than this go up resumably: 5 MiB (Google: "5 MB or less" for multipart).
    public static let resumableThreshold = 5 * 1024 * 1024
    /// The default resumable chunk: 8 MiB.
    public static let defaultChunkSize = 8 * 1024 * 1024
    /// Chunks are multiples of this: 256 KiB.
    public static let chunkGranularity = 262_144
    /// The most calls one batch request carries (Drive's limit).
    public static let batchLimit = 100
    /// The largest page `files.list` returns.
    public static let pageSize = 1000
    /// How long a write takes a name missing from the last full listing as absent, without asking Drive again.
    public static let listingTrust = Duration.seconds(5)
    /// Where the last seen permission id is kept in the provider's state.
    static let identityStateName = "drive.permissionId"

    /// The provider's id in the store.
    public let id: String
    /// A file-tier provider that lists, reports quota and account events, 100 keys a batch.
    public let capabilities: ProviderCapabilities
    /// The API's base URL (`https://www.googleapis.com`), without a trailing `/`.
    public let endpoint: URL
    /// The size of each resumable chunk but the last; a multiple of 256 KiB.
    public let chunkSize: Int

    private let http: HTTPClient
    private let chunkHTTP: HTTPClient
    private let state: ProviderState
    private let logger: ProviderLogger
    private let metrics: ProviderMetrics
    private let readOnly: Bool
    private let closed = Mutex(false)
    private let clock: any StoreClock
    /// How often a remote-change subscription polls the change feed; nil offers no subscription.
    public let changePollInterval: Duration?
    private let pollers = Mutex<[Int: Task<Void, Never>]>([:])

    struct Entry: Sendable, Equatable {
        var id: String
        var duplicates: [String]
        /// The file's checksum as the last listing gave it (its version tag); nil after this provider wrote it.
        var version: String? = nil
    }

    /// Names are keys, compared as bytes (``StoreKey``), as Drive compares them.
    private struct Cache {
        var entries: [StoreKey: Entry] = [:]
        var lastListingCount: Int?
        /// When the last full listing began (on the provider's clock); ``entries`` has held everything it found,
        /// kept up to date with this provider's own writes and removes, ever since.
        var listedAtMs: Int64?
        /// Names whose entry may be stale since that listing (the change feed reported them, or their id answered
        /// 404): the listing no longer speaks for them.
        var doubtful: Set<StoreKey> = []
        /// Changes to ``entries`` other than a listing's; a listing during which it moved is not trusted, since it
        /// replaced entries with what it saw before them.
        var changes = 0
        var duplicates: Set<String> = []
        /// Every file id seen and its name, kept after the entry is forgotten, so the change feed can name a deleted
        /// file.
        var names: [String: String] = [:]
    }

    private let cache = Mutex(Cache())
    /// The names of listings under way, oldest first, at most ``keptListings``.
    private let listings = Mutex<[(id: String, names: [(name: String, version: String?)])]>([])
    private let subscribers = Mutex<[Int: @Sendable (AccountEvent) -> Void]>([:])
    private let nextSubscriber = Mutex(0)

    /// A provider for `endpoint`, authorizing with `authenticator`, sending through `transport`.
    ///
    /// - Parameters:
    ///   - context: the provider's id, clock, state (the remembered permission id), metrics and logger.
    ///   - timeout: each request's deadline (one request may carry a whole chunk).
    ///   - maxConcurrency: requests in flight at once.
    ///   - chunkSize: resumable chunks, rounded down to a multiple of 256 KiB (at least one).
    ///   - readOnly: refuse writes and removes (dry runs).
    ///   - changePollInterval: poll the change feed this often for ``subscribeToRemoteChanges(_:)``; nil (the
    ///     default) offers no remote-change subscription.
    public init(
        endpoint: URL, authenticator: any HTTPAuthenticator, transport: any HTTPTransport, context: ProviderContext,
        timeout: Duration = .seconds(60), maxConcurrency: Int = 8, retryPolicy: RetryPolicy = RetryPolicy(),
        chunkSize: Int = DriveProvider.defaultChunkSize, readOnly: Bool = false, changePollInterval: Duration? = nil
    ) {
        var text = endpoint.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        self.endpoint = URL(string: text) ?? endpoint
        id = context.providerID
        var capabilities = Self.capabilities
        capabilities.emitsRemoteChanges = changePollInterval != nil
        capabilities.requestsAtOnce = maxConcurrency
        self.capabilities = capabilities
        self.changePollInterval = changePollInterval
        clock = context.clock
        self.chunkSize = max(Self.chunkGranularity, chunkSize / Self.chunkGranularity * Self.chunkGranularity)
        state = context.state
        logger = context.logger
        metrics = context.metrics
        self.readOnly = readOnly
        let drive = DriveRateLimitTransport(next: transport)
        http = HTTPClient(
            transport: drive, context: context, authenticator: authenticator, retryPolicy: retryPolicy,
            timeout: timeout, maxConcurrency: maxConcurrency)
        // Chunks are not sent twice blindly: after a failure the upload asks the server where it stands.
        var once = retryPolicy
        once.maxAttempts = 1
        chunkHTTP = HTTPClient(
            transport: drive, context: context, authenticator: authenticator, retryPolicy: once, timeout: timeout,
            maxConcurrency: maxConcurrency)
    }

    /// What every Drive provider can do.
    public static let capabilities = ProviderCapabilities(
        tier: .file, keyRules: [], batchLimit: batchLimit, canList: true, reportsQuota: true,
        emitsAccountEvents: true, emitsRemoteChanges: false, listsInKeyOrder: true, requestsAtOnce: 8)

    /// How many surplus files sharing a key's name were found (and, on writes and removes, deleted) so far.
    public var duplicatesResolved: Int { cache.withLock { $0.duplicates.count } }

    // MARK: Plumbing

    private func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(.closed, "the googleDrive provider \(id) was closed; make a new one", provider: id)
        }
    }

    private func ensureWritable() throws(CloudSyncError) {
        try ensureOpen()
        if readOnly {
            throw CloudSyncError(
                .unsupported, "the googleDrive provider \(id) is read-only here (a dry run); nothing was changed",
                provider: id)
        }
    }

    /// Stops serving; later calls fail with `ERR_CLOSED`.
    public func close() async {
        closed.withLock { $0 = true }
        for poller in pollers.withLock({ pollers in
            defer { pollers.removeAll() }
            return Array(pollers.values)
        }) {
            poller.cancel()
        }
        http.close()
        chunkHTTP.close()
    }

    /// Polls the change feed every ``changePollInterval`` and calls `handler` with the keys changed or removed.
    ///
    /// Nil without an interval. Changes this provider made are reported too; a failed poll is logged and tried again
    /// next time.
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    {
        guard let interval = changePollInterval else { return nil }
        let number = nextSubscriber.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        let task = Task { [weak self, clock] in
            var cursor: String?
            while !Task.isCancelled {
                guard let provider = self else { return }
                do throws(CloudSyncError) {
                    if cursor == nil {
                        cursor = try await provider.changes(since: nil).cursor
                    } else {
                        let changes = try await provider.changes(since: cursor)
                        cursor = changes.cursor
                        let keys = changes.changed + changes.removed
                        if !keys.isEmpty || !changes.removedFileIDs.isEmpty {
                            handler(
                                RemoteChange(provider: provider.id, keys: changes.removedFileIDs.isEmpty ? keys : nil))
                        }
                    }
                } catch {
                    if error.code == .closed { return }
                    provider.logger.log(.warning, "polling \(provider.id)'s change feed failed: \(error.message)")
                }
                do {
                    try await clock.sleep(for: interval)
                } catch {
                    return
                }
            }
        }
        pollers.withLock { $0[number] = task }
        return ProviderSubscription { [weak self] in
            self?.pollers.withLock { $0.removeValue(forKey: number) }?.cancel()
        }
    }

    private func url(_ path: String, _ query: [(String, String)] = []) -> URL {
        var text = endpoint.absoluteString + path
        if !query.isEmpty {
            text += "?" + query.map { "\($0)=\(Self.queryEscape($1))" }.joined(separator: "&")
        }
        return URL(string: text)!
    }

    static func queryEscape(_ text: String) -> String {
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    private func filePath(_ fileID: String) -> String { "/drive/v3/files/" + Self.queryEscape(fileID) }

    private func send(_ request: HTTPRequest, key: String? = nil, client: HTTPClient? = nil)
        async throws(CloudSyncError) -> HTTPResponse
    {
        do {
            return try await (client ?? http).send(request)
        } catch {
            if error.code == .notSignedIn, !error.message.contains("cloudsync login") {
                throw CloudSyncError(
                    .notSignedIn, "\(error.message); run `cloudsync login` for this pipeline's provider \(id)",
                    provider: id, key: key)
            }
            if error.code == .rateLimited || error.code == .server {
                // The retry layer gave up on an answer: say it as Drive meant it.
                throw CloudSyncError(
                    error.code, error.message, provider: id, key: key, retryAfterMs: error.retryAfterMs)
            }
            throw error.attributed(provider: id, key: key)
        }
    }

    private func failure(_ response: HTTPResponse, _ request: HTTPRequest, key: String? = nil) -> CloudSyncError {
        DriveErrorMapping.error(for: response, to: request, key: key).attributed(provider: id)
    }

    private func sendExpectingSuccess(_ request: HTTPRequest, key: String? = nil) async throws(CloudSyncError)
        -> HTTPResponse
    {
        let response = try await send(request, key: key)
        guard response.isSuccess else { throw failure(response, request, key: key) }
        return response
    }

    private func json(_ response: HTTPResponse, _ request: HTTPRequest) throws(CloudSyncError) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else {
            throw CloudSyncError(
                .provider,
                "\(request.method) \(HTTPRedaction.redactedPath(request.url)) answered something other "
                    + "than a JSON object", provider: id)
        }
        return object
    }

    // MARK: Account

    /// Available when `about.get` answers; otherwise why not.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) { return .unavailable(.closed, "the googleDrive provider \(id) was closed") }
        do {
            _ = try await about(fields: "user")
            return .available
        } catch {
            switch error.code {
            case .notSignedIn: return .unavailable(.signedOut, error.message)
            case .containerMisconfigured, .config: return .unavailable(.misconfigured, error.message)
            case .offline: return .unavailable(.offline, error.message)
            case .timeout: return .unavailable(.timedOut, error.message)
            default: return .unavailable(.other, error.message)
            }
        }
    }

    private func about(fields: String) async throws(CloudSyncError) -> [String: Any] {
        let request = HTTPRequest(method: .get, url: url("/drive/v3/about", [("fields", fields)]))
        return try json(try await sendExpectingSuccess(request), request)
    }

    /// `about.get`: `usage` is the used bytes, `limit` the total; no `limit` means unlimited (a nil total).
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        let quota = try await about(fields: "storageQuota,user")["storageQuota"] as? [String: Any] ?? [:]
        func number(_ name: String) -> Int64? { (quota[name] as? String).flatMap { Int64($0) } }
        return ProviderQuota(usedBytes: number("usage"), totalBytes: number("limit"))
    }

    /// The signed-in user's `permissionId`; when it differs from the one the provider's state remembers, the caches
    /// are cleared and subscribers get an account event with `identityChanged`.
    public func accountIdentity() async throws -> String? {
        try ensureOpen()
        let user = try await about(fields: "user")["user"] as? [String: Any]
        guard let permissionID = user?["permissionId"] as? String, !permissionID.isEmpty else {
            throw CloudSyncError(.provider, "Drive's about.get carried no user.permissionId", provider: id)
        }
        let previous = try state.value(Self.identityStateName)
        // A dry run may keep no state; the identity is still the answer.
        if previous != permissionID { try? state.set(permissionID, for: Self.identityStateName) }
        if let previous, previous != permissionID {
            logger.log(.warning, "the Google account behind \(id) changed; its cached file ids are forgotten")
            await clearCaches()
            let event = AccountEvent(
                identityChanged: true, status: .available, provider: id, eventID: "drive:\(id):\(permissionID)")
            for handler in subscribers.withLock({ Array($0.values) }) { handler(event) }
        }
        return permissionID
    }

    /// Calls `handler` when ``accountIdentity()`` finds another account signed in than before.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    {
        let number = nextSubscriber.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        subscribers.withLock { $0[number] = handler }
        return ProviderSubscription { [weak self] in _ = self?.subscribers.withLock { $0.removeValue(forKey: number) } }
    }

    /// Forgets every file id (an account switch makes them someone else's).
    public func clearCaches() async {
        cache.withLock { cache in
            cache.entries.removeAll()
            cache.names.removeAll()
            cache.lastListingCount = nil
            cache.listedAtMs = nil
            cache.doubtful.removeAll()
        }
    }

    // MARK: Lookups

    static let listFields = "nextPageToken,files(id,name,modifiedTime,md5Checksum,sha256Checksum)"

    /// `name = '…'` with Drive's escapes: `\` as `\\`, `'` as `\'`.
    static func nameQuery(_ key: String) -> String {
        let escaped = key.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
        return "name = '\(escaped)' and trashed = false"
    }

    private struct Listed {
        var id: String
        var name: String
        var modified: String
        /// The content's `md5Checksum` (or `sha256Checksum` where Drive gives only that): a new one with every
        /// change of the bytes.
        var checksum: String?
    }

    /// One `files.list` page; nil when Drive rejected the page token.
    private func listPage(query: String, pageToken: String?, pageSize: Int, orderBy: String?, fields: String)
        async throws(CloudSyncError) -> (files: [Listed], next: String?)?
    {
        var items = [
            ("spaces", "appDataFolder"), ("q", query), ("pageSize", String(pageSize)), ("fields", fields),
        ]
        if let orderBy { items.append(("orderBy", orderBy)) }
        if let pageToken { items.append(("pageToken", pageToken)) }
        let request = HTTPRequest(method: .get, url: url("/drive/v3/files", items))
        let response = try await send(request)
        if response.status == 400, pageToken != nil, DriveErrorBody(response.body).location == "pageToken" {
            return nil
        }
        guard response.isSuccess else { throw failure(response, request) }
        let object = try json(response, request)
        let files = (object["files"] as? [[String: Any]] ?? []).compactMap { file -> Listed? in
            guard let id = file["id"] as? String, let name = file["name"] as? String else { return nil }
            let checksum =
                (file["md5Checksum"] as? String).map { "md5:" + $0 }
                ?? (file["sha256Checksum"] as? String).map { "sha256:" + $0 }
            return Listed(
                id: id, name: name, modified: file["modifiedTime"] as? String ?? "", checksum: checksum)
        }
        let next = object["nextPageToken"] as? String
        return (files, next?.isEmpty == false ? next : nil)
    }

    /// Every file matching `query`, all pages; a rejected page token starts the listing again (twice at most).
    private func listAll(query: String) async throws(CloudSyncError) -> [Listed] {
        var restarts = 0
        while true {
            var files: [Listed] = []
            var token: String?
            var rejected = false
            repeat {
                guard
                    let page = try await listPage(
                        query: query, pageToken: token, pageSize: Self.pageSize, orderBy: nil, fields: Self.listFields)
                else {
                    rejected = true
                    break
                }
                files += page.files
                token = page.next
            } while token != nil
            if !rejected { return files }
            restarts += 1
            guard restarts <= 2 else {
                throw CloudSyncError(
                    .provider, "Drive rejected the listing's page tokens three times in a row; try again later",
                    provider: id)
            }
            logger.log(.info, "Drive rejected a page token of \(id)'s listing; listing again from the start")
        }
    }

    /// Groups `files` by name: the newest `modifiedTime` is the key's file, the others duplicates.
    private func entries(_ files: [Listed]) -> [StoreKey: Entry] {
        var byName: [StoreKey: [Listed]] = [:]
        for file in files { byName[StoreKey(file.name), default: []].append(file) }
        cache.withLock { cache in
            for file in files { cache.names[file.id] = file.name }
        }
        var entries: [StoreKey: Entry] = [:]
        for (name, group) in byName {
            let sorted = group.sorted { ($0.modified, $0.id) > ($1.modified, $1.id) }
            entries[name] = Entry(
                id: sorted[0].id, duplicates: sorted.dropFirst().map(\.id), version: sorted[0].checksum)
        }
        let surplus = entries.values.flatMap(\.duplicates)
        if !surplus.isEmpty {
            let fresh = cache.withLock { cache -> Int in
                let before = cache.duplicates.count
                cache.duplicates.formUnion(surplus)
                return cache.duplicates.count - before
            }
            if fresh > 0 {
                metrics.recordDuplicates(fresh)
                logger.log(
                    .warning,
                    "\(fresh) more files in \(id)'s app data folder share a key's name with a newer one; reads use "
                        + "the newest, writes and removes delete the others")
            }
        }
        return entries
    }

    /// The file (and duplicates) of each of `keys` that exists; cached ids first, then one listing or one search per
    /// key, whichever costs fewer requests.
    ///
    /// `forWriting`: a name missing from a full listing begun less than ``listingTrust`` ago is taken as absent
    /// without asking again, so the store's batches of new keys share one listing. Another device may create the
    /// name meanwhile, as it may between any lookup and the create that follows it; the write then makes a second
    /// file of that name, which reads settle (the newest wins) and the next write deletes. Reads and removes never
    /// take a name as absent on trust: a read would miss the other device's value, a remove would leave it.
    func resolve(_ keys: [String], forWriting: Bool = false) async throws(CloudSyncError) -> [StoreKey: Entry] {
        let now = clock.nowMilliseconds()
        let (known, lastCount, trusted) = cache.withLock { cache in
            let fresh = forWriting && cache.listedAtMs.map { now - $0 < Self.listingTrust.milliseconds } == true
            return (cache.entries, cache.lastListingCount, fresh ? cache.doubtful : nil)
        }
        var found: [StoreKey: Entry] = [:]
        var missing: [String] = []
        for name in keys.keySet() {
            if let entry = known[name] {
                found[name] = entry
            } else if let doubtful = trusted, !doubtful.contains(name) {
                continue
            } else {
                missing.append(name.string)
            }
        }
        guard !missing.isEmpty else { return found }
        let listingPages = max(1, ((lastCount ?? 0) + Self.pageSize - 1) / Self.pageSize)
        if missing.count > 1, lastCount == nil || listingPages < missing.count {
            let listed = try await listFolder()
            for key in missing { found[StoreKey(key)] = listed[StoreKey(key)] }
            return found
        }
        let searched = try await forEach(missing) { key async -> Result<Entry?, CloudSyncError> in
            do throws(CloudSyncError) {
                return .success(try await self.search(key))
            } catch {
                return .failure(error)
            }
        }
        for (key, result) in zip(missing, searched) {
            if let entry = try result.get() { found[StoreKey(key)] = entry }
        }
        return found
    }

    /// Lists the whole app data folder and makes what it found the file id cache.
    private func listFolder() async throws(CloudSyncError) -> [StoreKey: Entry] {
        let (started, changesBefore) = (clock.nowMilliseconds(), cache.withLock { $0.changes })
        let files = try await listAll(query: "trashed = false")
        let listed = entries(files)
        cache.withLock { cache in
            cache.entries = listed
            cache.lastListingCount = files.count
            // A write, remove or lookup meanwhile (another store call) may be missing from the listing.
            if cache.changes == changesBefore {
                cache.listedAtMs = started
                cache.doubtful.removeAll()
            } else {
                cache.listedAtMs = nil
            }
        }
        return listed
    }

    /// Looks `key` up by name (one request) and caches what it finds.
    private func search(_ key: String) async throws(CloudSyncError) -> Entry? {
        let files = try await listAll(query: Self.nameQuery(key))
        // Drive may answer names it deems equal (other normalisations, other case); only the same bytes are the key.
        let entry = entries(files.filter { StoreKey.bytesEqual($0.name, key) })[StoreKey(key)]
        cache.withLock { cache in
            cache.entries[StoreKey(key)] = entry
            cache.doubtful.remove(StoreKey(key))
            cache.changes += 1
        }
        return entry
    }

    /// Drops `key`'s entry after this provider removed its file: it is known to be absent.
    private func forget(_ key: String) {
        cache.withLock { cache in
            cache.entries.removeValue(forKey: StoreKey(key))
            cache.changes += 1
        }
    }

    /// Drops `key`'s entry because it may be stale: it is looked up again before anything relies on it.
    private func doubt(_ key: String) {
        cache.withLock { cache in
            cache.entries.removeValue(forKey: StoreKey(key))
            cache.doubtful.insert(StoreKey(key))
            cache.changes += 1
        }
    }

    // MARK: Get

    /// Downloads each key's file (`alt=media`), several at once; nil for a key with no file.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try ensureOpen()
        let entries = try await resolve(keys)
        return try await forEach(keys) { key async -> Result<String?, CloudSyncError> in
            do throws(CloudSyncError) {
                guard let entry = entries[StoreKey(key)] else { return .success(nil) }
                if let value = try await self.download(entry.id, key: key) { return .success(value) }
                // The cached id is gone: look again once.
                self.doubt(key)
                guard let again = try await self.search(key) else { return .success(nil) }
                return .success(try await self.download(again.id, key: key))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The file's content as text; nil when the file is gone (404).
    private func download(_ fileID: String, key: String) async throws(CloudSyncError) -> String? {
        let request = HTTPRequest(method: .get, url: url(filePath(fileID), [("alt", "media")]))
        let response = try await send(request, key: key)
        if response.status == 404 { return nil }
        guard response.isSuccess else { throw failure(response, request, key: key) }
        guard let value = String(validating: response.body, as: UTF8.self) else {
            throw CloudSyncError(
                .decode,
                "the file \(key) in \(id)'s app data folder is not UTF-8 text (\(response.body.count) bytes); values "
                    + "are strings, so it was not written by CloudSync",
                provider: id, key: key)
        }
        return value
    }

    // MARK: Set

    /// Creates or updates each key's file, several at once: one request for a value up to
    /// ``resumableThreshold`` bytes whose file is known, resumable chunks above it.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureWritable()
        let entries = try await resolve(items.map(\.key), forWriting: true)
        return try await forEach(items) { item async -> Result<Void, CloudSyncError> in
            do throws(CloudSyncError) {
                try await self.write(item, entry: entries[StoreKey(item.key)])
                return .success(())
            } catch {
                return .failure(error)
            }
        }
    }

    private func write(_ item: KeyValue, entry: Entry?) async throws(CloudSyncError) {
        let body = Data(item.value.utf8)
        var entry = entry
        var fileID: String?
        if let known = entry {
            fileID = try await upload(body, key: item.key, existing: known.id)
            if fileID == nil {
                // The cached id is gone: look again once, then create.
                doubt(item.key)
                entry = try await search(item.key)
                if let found = entry { fileID = try await upload(body, key: item.key, existing: found.id) }
            }
        }
        let created = fileID == nil
        if fileID == nil { fileID = try await upload(body, key: item.key, existing: nil) }
        guard let fileID else { return }
        cache.withLock { cache in
            cache.entries[StoreKey(item.key)] = Entry(id: fileID, duplicates: [])
            cache.names[fileID] = item.key
            cache.changes += 1
        }
        if !created, let duplicates = entry?.duplicates, !duplicates.isEmpty {
            let results = try await delete(duplicates.map { (item.key, $0) })
            for case .failure(let error) in results { throw error }
        }
    }

    /// Uploads `body` as a new file (`existing` nil) or over `existing`; returns the file id, or nil when `existing`
    /// is gone.
    private func upload(_ body: Data, key: String, existing: String?) async throws(CloudSyncError) -> String? {
        if body.count > Self.resumableThreshold {
            return try await resumableUpload(body, key: key, existing: existing)
        }
        let request: HTTPRequest
        let fields = ("fields", "id,name,modifiedTime")
        if let existing {
            request = HTTPRequest(
                method: .patch, url: url("/upload" + filePath(existing), [("uploadType", "media"), fields]),
                headers: ["Content-Type": "application/octet-stream"], body: body, isRetrySafe: true)
        } else {
            let boundary = MIMEMultipart.randomBoundary()
            let multipart = MIMEMultipart.build(
                [
                    MIMEMultipart.Part(
                        headers: ["Content-Type": "application/json; charset=UTF-8"], body: metadata(key)),
                    MIMEMultipart.Part(headers: ["Content-Type": "application/octet-stream"], body: body),
                ], boundary: boundary)
            // A retried create may leave two files of one name; reads and the next write settle that.
            request = HTTPRequest(
                method: .post, url: url("/upload/drive/v3/files", [("uploadType", "multipart"), fields]),
                headers: ["Content-Type": "multipart/related; boundary=\(boundary)"], body: multipart,
                isRetrySafe: true)
        }
        let response = try await send(request, key: key)
        if response.status == 404, existing != nil { return nil }
        guard response.isSuccess else { throw failure(response, request, key: key) }
        return try fileID(of: response, request, key: key)
    }

    private func metadata(_ key: String) -> Data {
        (try? JSONSerialization.data(
            withJSONObject: ["name": key, "parents": ["appDataFolder"]], options: [.sortedKeys]))
            ?? Data()
    }

    private func fileID(of response: HTTPResponse, _ request: HTTPRequest, key: String) throws(CloudSyncError)
        -> String
    {
        guard let id = try json(response, request)["id"] as? String, !id.isEmpty else {
            throw CloudSyncError(
                .provider, "Drive answered an upload of \(key) without the file's id", provider: self.id, key: key)
        }
        return id
    }

    /// The most interruptions one resumable upload sits out, and the most times it starts over after a 404.
    static let maxInterruptions = 5
    static let maxRestarts = 2

    /// Uploads `body` resumably: a session, then ``chunkSize`` chunks; after a failed chunk it asks where the
    /// session stands (`bytes */total`) and goes on from the server's `Range`; a session gone (404) starts over.
    private func resumableUpload(_ body: Data, key: String, existing: String?) async throws(CloudSyncError)
        -> String?
    {
        let total = body.count
        var restarts = 0
        var interruptions = 0
        session: while true {
            let start = HTTPRequest(
                method: existing == nil ? .post : .patch,
                url: url(
                    "/upload" + (existing.map(filePath) ?? "/drive/v3/files"),
                    [("uploadType", "resumable"), ("fields", "id,name,modifiedTime")]),
                headers: [
                    "Content-Type": "application/json; charset=UTF-8",
                    "X-Upload-Content-Type": "application/octet-stream", "X-Upload-Content-Length": String(total),
                ],
                body: existing == nil ? metadata(key) : Data("{}".utf8), isRetrySafe: true)
            let started = try await send(start, key: key)
            if started.status == 404, existing != nil { return nil }
            guard started.isSuccess else { throw failure(started, start, key: key) }
            guard let location = started.headers["Location"], let sessionURL = URL(string: location) else {
                throw CloudSyncError(
                    .provider, "Drive started a resumable upload of \(key) without a session URI (Location)",
                    provider: id, key: key)
            }
            var offset = 0
            while true {
                let end = min(offset + chunkSize, total)
                let chunk = HTTPRequest(
                    method: .put, url: sessionURL,
                    headers: [
                        "Content-Range": total == 0 ? "bytes */0" : "bytes \(offset)-\(end - 1)/\(total)",
                        "Content-Type": "application/octet-stream",
                    ], body: body.subdata(in: offset..<end))
                var answer: HTTPResponse?
                var interruption: CloudSyncError?
                do throws(CloudSyncError) {
                    let response = try await send(chunk, key: key, client: chunkHTTP)
                    if response.isSuccess || response.status == 308 || response.status == 404 {
                        answer = response
                    } else {
                        let error = failure(response, chunk, key: key)
                        guard error.isRetryable else { throw error }
                        interruption = error
                    }
                } catch {
                    guard error.isRetryable else { throw error }
                    interruption = error
                }
                if let interruption {
                    interruptions += 1
                    guard interruptions <= Self.maxInterruptions else { throw interruption }
                    logger.log(
                        .info,
                        "the upload of \(key) to \(id) was interrupted (\(interruption.code)); asking Drive "
                            + "where it stands")
                    let status = HTTPRequest(
                        method: .put, url: sessionURL, headers: ["Content-Range": "bytes */\(total)"])
                    answer = try await send(status, key: key)
                }
                guard let response = answer else { continue }
                if response.isSuccess { return try fileID(of: response, chunk, key: key) }
                if response.status == 404 {
                    restarts += 1
                    guard restarts <= Self.maxRestarts else {
                        throw CloudSyncError(
                            .server, "Drive lost the upload session of \(key) \(restarts) times; try again later",
                            provider: id, key: key)
                    }
                    logger.log(.info, "Drive forgot the upload session of \(key); starting the upload again")
                    continue session
                }
                guard response.status == 308 else { throw failure(response, chunk, key: key) }
                offset = Self.nextOffset(range: response.headers["Range"])
                if let moved = response.headers["Location"], let movedURL = URL(string: moved), movedURL != sessionURL {
                    logger.log(.debug, "Drive moved the upload session of \(key)")
                }
            }
        }
    }

    /// The offset after `Range: bytes=0-N` (N + 1), or 0 when the server has nothing.
    static func nextOffset(range: String?) -> Int {
        guard let range, let dash = range.lastIndex(of: "-"), let last = Int(range[range.index(after: dash)...])
        else { return 0 }
        return last + 1
    }

    // MARK: Remove

    /// Deletes each key's file and any duplicates.
    ///
    /// One `DELETE`, or batch requests of 100 when there are several; a key with no file succeeds.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureWritable()
        let entries = try await resolve(keys)
        var targets: [(key: String, id: String)] = []
        var seen: Set<String> = []
        for key in keys {
            guard let entry = entries[StoreKey(key)] else { continue }
            for fileID in [entry.id] + entry.duplicates where seen.insert(fileID).inserted {
                targets.append((key, fileID))
            }
        }
        let results = try await delete(targets)
        var failures: [String: CloudSyncError] = [:]
        for (target, result) in zip(targets, results) {
            if case .failure(let error) = result { failures[target.key] = error }
        }
        for key in keys where failures[key] == nil { forget(key) }
        return keys.map { key in failures[key].map { .failure($0) } ?? .success(()) }
    }

    /// Deletes the files, positionally; a file already gone (404) counts as deleted.
    private func delete(_ targets: [(key: String, id: String)]) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        if targets.isEmpty { return [] }
        if targets.count == 1 {
            let request = HTTPRequest(method: .delete, url: url(filePath(targets[0].id)))
            let response = try await send(request, key: targets[0].key)
            if response.isSuccess || response.status == 404 { return [.success(())] }
            let error = failure(response, request, key: targets[0].key)
            if DriveErrorMapping.isBatchWide(error) { throw error.concerningNoKey() }
            return [.failure(error)]
        }
        var results: [Result<Void, CloudSyncError>] = []
        for start in stride(from: 0, to: targets.count, by: Self.batchLimit) {
            results += try await deleteBatch(Array(targets[start..<min(start + Self.batchLimit, targets.count)]))
        }
        return results
    }

    private func deleteBatch(_ targets: [(key: String, id: String)]) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        let boundary = MIMEMultipart.randomBoundary()
        let basePath = endpoint.path
        let parts = targets.enumerated().map { index, target in
            MIMEMultipart.Part(
                headers: ["Content-Type": "application/http", "Content-ID": "<item\(index)>"],
                body: Data("DELETE \(basePath)\(filePath(target.id)) HTTP/1.1\r\n\r\n".utf8))
        }
        let request = HTTPRequest(
            method: .post, url: url("/batch/drive/v3"),
            headers: ["Content-Type": "multipart/mixed; boundary=\(boundary)"],
            body: MIMEMultipart.build(parts, boundary: boundary), isRetrySafe: true)
        let response = try await sendExpectingSuccess(request)
        guard let answers = MIMEMultipart.parse(response.body, contentType: response.headers["Content-Type"]) else {
            throw CloudSyncError(
                .provider,
                "Drive answered a batch of \(targets.count) deletes with something other than "
                    + "multipart/mixed", provider: id)
        }
        var results = [Result<Void, CloudSyncError>?](repeating: nil, count: targets.count)
        for (position, answer) in answers.enumerated() {
            var index = position
            if let contentID = answer.headers["Content-ID"], let range = contentID.range(of: "item") {
                index = Int(contentID[range.upperBound...].prefix { $0.isNumber }) ?? position
            }
            guard targets.indices.contains(index), let head = MIMEMultipart.splitHead(answer.body),
                let statusLine = head.lines.first
            else { continue }
            let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            if (200..<300).contains(status) || status == 404 {
                results[index] = .success(())
            } else {
                let inner = HTTPResponse(
                    status: status, headers: MIMEMultipart.headers(Array(head.lines.dropFirst())), body: head.body)
                let innerRequest = HTTPRequest(method: .delete, url: url(filePath(targets[index].id)))
                results[index] = .failure(failure(inner, innerRequest, key: targets[index].key))
            }
        }
        let final = results.enumerated().map { index, result in
            result
                ?? .failure(
                    CloudSyncError(
                        .provider, "Drive's batch answer had no part for the delete of \(targets[index].key)",
                        provider: id, key: targets[index].key))
        }
        for case .failure(let error) in final where DriveErrorMapping.isBatchWide(error) {
            throw error.concerningNoKey()
        }
        return final
    }

    // MARK: List

    /// One page of keys in bytewise order, each name once.
    ///
    /// Drive's own order cannot be trusted for paging: `orderBy=name` is documented only as "alphabetical" (its web
    /// interface sorts case-insensitively, and very large folders ignore it), and a page token is a position in a
    /// listing that removals shift. So the first page reads every name of the app data folder (all of Drive's pages,
    /// one request per ``pageSize`` files, which also refreshes the file id cache), sorts them by their bytes, and
    /// serves pages from that; the cursor names the listing and the last key yielded, so a removal never moves it,
    /// and a listing this provider no longer holds (another process, or more than ``keptListings`` at once) is read
    /// again and continues after that key.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        let (listingID, last) = Self.decodeCursor(cursor)
        var names = listingID.flatMap { id in listings.withLock { $0.first { $0.id == id }?.names } }
        let id = names == nil ? UUID().uuidString : listingID!
        if names == nil {
            let read = try await allNames()
            names = read
            listings.withLock { listings in
                listings.append((id, read))
                if listings.count > Self.keptListings { listings.removeFirst(listings.count - Self.keptListings) }
            }
        }
        let sorted = names ?? []
        var start = 0
        if let last {
            // The first name after `last`, by binary search.
            var high = sorted.count
            while start < high {
                let middle = (start + high) / 2
                if StoreKey.compareBytes(sorted[middle].name, last) <= 0 { start = middle + 1 } else { high = middle }
            }
        }
        let end = min(start + max(limit, 1), sorted.count)
        let page = sorted[start..<end]
        let keys = page.map(\.name)
        let versions = page.map(\.version)
        guard end < sorted.count, let lastKey = keys.last else {
            listings.withLock { $0.removeAll { $0.id == id } }
            return KeyPage(keys: keys, nextCursor: nil, versions: versions)
        }
        return KeyPage(keys: keys, nextCursor: Self.encodeCursor(listing: id, last: lastKey), versions: versions)
    }

    /// How many listings under way this provider keeps the names of; an older one is read again when its cursor
    /// comes back.
    public static let keptListings = 4

    /// Every key in the app data folder, each once, in bytewise order, with its file's checksum.
    private func allNames() async throws(CloudSyncError) -> [(name: String, version: String?)] {
        try await listFolder().sorted { $0.key < $1.key }.map { ($0.key.string, $0.value.version) }
    }

    static func encodeCursor(listing: String, last: String) -> String {
        let data = try? JSONSerialization.data(withJSONObject: [listing, last])
        return String(decoding: data ?? Data(), as: UTF8.self)
    }

    /// The listing and last key a cursor names; a cursor of another form names neither, so the listing starts over.
    static func decodeCursor(_ cursor: String?) -> (listing: String?, last: String?) {
        guard let cursor, let array = (try? JSONSerialization.jsonObject(with: Data(cursor.utf8))) as? [String],
            array.count == 2
        else { return (nil, nil) }
        return (array[0], array[1].isEmpty ? nil : array[1])
    }

    // MARK: Changes

    /// What changed in the app data folder since a cursor.
    public struct Changes: Sendable, Equatable {
        /// Keys whose file was created or changed.
        public var changed: [String]
        /// Keys whose file was deleted (or trashed); a deleted file this provider never saw is in ``removedFileIDs``.
        public var removed: [String]
        /// Ids of deleted files whose names were not known here.
        public var removedFileIDs: [String]
        /// The cursor for the next call.
        public var cursor: String
    }

    /// The changes since `cursor` (Drive's page token); nil starts the feed now and returns no changes.
    public func changes(since cursor: String?) async throws(CloudSyncError) -> Changes {
        try ensureOpen()
        guard let cursor else {
            let request = HTTPRequest(method: .get, url: url("/drive/v3/changes/startPageToken"))
            let token = try json(try await sendExpectingSuccess(request), request)["startPageToken"] as? String
            guard let token else {
                throw CloudSyncError(.provider, "Drive answered without a startPageToken", provider: id)
            }
            return Changes(changed: [], removed: [], removedFileIDs: [], cursor: token)
        }
        var result = Changes(changed: [], removed: [], removedFileIDs: [], cursor: cursor)
        var token = cursor
        while true {
            let request = HTTPRequest(
                method: .get,
                url: url(
                    "/drive/v3/changes",
                    [
                        ("pageToken", token), ("spaces", "appDataFolder"), ("pageSize", "1000"),
                        ("fields", "nextPageToken,newStartPageToken,changes(fileId,removed,file(id,name,trashed))"),
                    ]))
            let object = try json(try await sendExpectingSuccess(request), request)
            for change in object["changes"] as? [[String: Any]] ?? [] {
                let fileID = change["fileId"] as? String ?? ""
                let file = change["file"] as? [String: Any]
                let removed = change["removed"] as? Bool == true || file?["trashed"] as? Bool == true
                let name =
                    file?["name"] as? String
                    ?? cache.withLock { $0.names[fileID] }
                guard let name else {
                    if removed { result.removedFileIDs.append(fileID) }
                    continue
                }
                // Another device wrote or deleted it: the cached id may be stale or a duplicate now.
                doubt(name)
                if removed {
                    result.removed.append(name)
                } else {
                    result.changed.append(name)
                }
            }
            if let next = object["nextPageToken"] as? String {
                token = next
                continue
            }
            result.cursor = object["newStartPageToken"] as? String ?? token
            return result
        }
    }

    /// The change feed's position now: Drive's start page token.
    public func changeFeedCursor() async throws -> String? { try await changes(since: nil).cursor }

    /// The keys changed since `cursor` (a Drive page token), every page read at once; expired when Drive reports a
    /// removed file whose name this provider does not know (its key cannot be named, so only a full comparison sees
    /// the removal).
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        let changes = try await changes(since: cursor)
        guard changes.removedFileIDs.isEmpty else {
            return .expired(
                "Drive reported \(changes.removedFileIDs.count) removed file(s) without their names, so the keys "
                    + "they held are unknown")
        }
        var seen = Set<StoreKey>()
        var keys: [KeyChange] = []
        for key in changes.removed where seen.insert(StoreKey(key)).inserted {
            keys.append(KeyChange(key: key, removed: true))
        }
        for key in changes.changed where seen.insert(StoreKey(key)).inserted {
            keys.append(KeyChange(key: key, removed: false))
        }
        return .changes(ChangePage(changes: keys, cursor: changes.cursor, hasMore: false))
    }

    // MARK: Batches

    /// Runs `body` for every element at once (``concurrentResults(_:_:)``) and returns the results in order; throws the first failure that concerns the whole account.
    private func forEach<Element: Sendable, Value: Sendable>(
        _ elements: [Element], _ body: @escaping @Sendable (Element) async -> Result<Value, CloudSyncError>
    ) async throws(CloudSyncError) -> [Result<Value, CloudSyncError>] {
        let results = await concurrentResults(elements, body)
        for result in results {
            if case .failure(let error) = result, DriveErrorMapping.isBatchWide(error) {
                throw error.attributed(provider: id).concerningNoKey()
            }
        }
        return results.map { $0.mapError { $0.attributed(provider: self.id) } }
    }
}
