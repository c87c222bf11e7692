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
///   writes take a name it did not find as new without asking again. For a folder of several pages, the trust is
///   then renewed from the change feed (one request, which names what other devices created or deleted since)
///   rather than by listing again. A cached id that answers 404 is dropped and
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
    /// Whether the app data folder took more than one listing page when last listed ("large"), kept in the
    /// provider's state so that a new process (every `cloudsync run`) knows it before its first listing.
    static let largeFolderStateName = "drive.largeFolder"

    /// The provider's id in the store.
    public let id: String
    /// A file-tier provider that lists, reports quota and account events, 100 keys a batch.
    public let capabilities: ProviderCapabilities
    /// The API's base URL (`https://www.googleapis.com`), without a trailing `/`.
    public let endpoint: URL
    /// The size of each resumable chunk but the last; a multiple of 256 KiB.
    public let chunkSize: Int

    let http: HTTPClient
    let chunkHTTP: HTTPClient
    let state: ProviderState
    let logger: ProviderLogger
    let metrics: ProviderMetrics
    let readOnly: Bool
    let closed = Mutex(false)
    let clock: any StoreClock
    /// How often a remote-change subscription polls the change feed; nil offers no subscription.
    public let changePollInterval: Duration?
    let pollers = Mutex<[Int: Task<Void, Never>]>([:])

    struct Entry: Sendable, Equatable {
        var id: String
        var duplicates: [String]
        /// The file's checksum as the last listing gave it (its version tag); nil after this provider wrote it.
        var version: String? = nil
        /// The file's `modifiedTime` as the last listing gave it, in milliseconds since the epoch (Drive's clock);
        /// nil after this provider wrote it.
        var modified: Int64? = nil
    }

    /// Names are keys, compared as bytes (``StoreKey``), as Drive compares them.
    struct Cache {
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
        /// The change feed's position taken as the trusted listing began, or as the feed read that last renewed it
        /// began.
        ///
        /// When the trust runs out, reading the feed from here renews it in one request instead of listing the
        /// folder again. Nil when none was taken: a folder of one page lists again as cheaply.
        var feedCursor: String?
    }

    let cache = Mutex(Cache())
    /// The feed read renewing the listing's trust, while one is under way: calls that need it at once share it.
    let renewal = Mutex<Task<Bool, Never>?>(nil)
    /// The names of listings under way, oldest first, at most ``keptListings``.
    let listings = Mutex<[(id: String, names: [(name: String, version: String?, modified: Int64?)])]>([])
    let subscribers = Mutex<[Int: @Sendable (AccountEvent) -> Void]>([:])
    let nextSubscriber = Mutex(0)

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
            timeout: timeout, maxConcurrency: maxConcurrency, serviceErrors: DriveErrorMapping.serviceErrors)
        // Chunks are not sent twice blindly: after a failure the upload asks the server where it stands.
        var once = retryPolicy
        once.maxAttempts = 1
        chunkHTTP = HTTPClient(
            transport: drive, context: context, authenticator: authenticator, retryPolicy: once, timeout: timeout,
            maxConcurrency: maxConcurrency, serviceErrors: DriveErrorMapping.serviceErrors)
    }

    /// What every Drive provider can do.
    public static let capabilities = ProviderCapabilities(
        tier: .file, keyRules: [], batchLimit: batchLimit, canList: true, reportsQuota: true,
        emitsAccountEvents: true, emitsRemoteChanges: false, listsInKeyOrder: true, requestsAtOnce: 8)

    /// How many surplus files sharing a key's name were found (and, on writes and removes, deleted) so far.
    public var duplicatesResolved: Int { cache.withLock { $0.duplicates.count } }

    // MARK: Plumbing

    func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(.closed, "the googleDrive provider \(id) was closed; make a new one", provider: id)
        }
    }

    func ensureWritable() throws(CloudSyncError) {
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

    func url(_ path: String, _ query: [(String, String)] = []) -> URL {
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

    func filePath(_ fileID: String) -> String { "/drive/v3/files/" + Self.queryEscape(fileID) }

    func send(_ request: HTTPRequest, key: String? = nil, client: HTTPClient? = nil)
        async throws(CloudSyncError) -> HTTPResponse
    {
        do {
            return try await (client ?? http).send(request)
        } catch {
            if error.code == .rateLimited || error.code == .server {
                // The retry layer gave up on an answer: say it as Drive meant it.
                throw CloudSyncError(
                    error.code, error.message, provider: id, key: key, retryAfterMs: error.retryAfterMs,
                    context: error.context)
            }
            throw error.attributed(provider: id, key: key)
        }
    }

    func failure(_ response: HTTPResponse, _ request: HTTPRequest, key: String? = nil) -> CloudSyncError {
        DriveErrorMapping.error(for: response, to: request, key: key).attributed(provider: id)
    }

    func sendExpectingSuccess(_ request: HTTPRequest, key: String? = nil) async throws(CloudSyncError)
        -> HTTPResponse
    {
        let response = try await send(request, key: key)
        guard response.isSuccess else { throw failure(response, request, key: key) }
        return response
    }

    func json(_ response: HTTPResponse, _ request: HTTPRequest) throws(CloudSyncError) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else {
            throw CloudSyncError(
                .provider,
                "\(request.method) \(HTTPRedaction.redactedPath(request.url)) answered something other "
                    + "than a JSON object", provider: id)
        }
        return object
    }

    // MARK: Batches

    /// Runs `body` for every element at once (``concurrentResults(_:_:)``) and returns the results in order; throws the first failure that concerns the whole account.
    func forEach<Element: Sendable, Value: Sendable>(
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
