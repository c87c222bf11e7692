import Foundation
import Synchronization

/// What every provider is handed when a pipeline makes it: the clock, a place for values it must keep between runs,
/// counters, a logger, and the pipeline's directory.
public struct ProviderContext: Sendable {
    /// The provider's id in the pipeline.
    public var providerID: String
    /// Where time comes from (backoff, token expiry).
    public var clock: any StoreClock
    /// Opaque values this provider keeps between runs (rotating tokens, change cursors), scoped to it.
    public var state: ProviderState
    /// Where the provider counts the requests it makes, so reports show what a run cost.
    public var metrics: ProviderMetrics
    /// Where the provider logs; secrets of its configuration are redacted from every message.
    public var logger: ProviderLogger
    /// The pipeline file's directory, against which relative paths resolve.
    public var directory: String
    /// A dry run: read what exists, change nothing, and stand in an empty provider for storage that does not exist.
    public var readOnly: Bool
    /// The pipeline file the provider is declared in, as the command line named it; nil outside a pipeline.
    public var pipelineFile: String?
    /// The named account the provider signs in with (`account:` in the file), which signing in again names too.
    public var account: String? = nil

    /// The command that signs this provider in, for messages: `cloudsync login <file> --provider <id>`, the
    /// placeholder `FILE` outside a pipeline.
    public var loginCommand: String {
        let file = pipelineFile.map { $0.contains(" ") ? "'\($0)'" : $0 } ?? "FILE"
        return "cloudsync login \(file) --provider \(providerID)" + (account.map { " --account \($0)" } ?? "")
    }

    /// A context for `providerID`; the defaults suit a program making providers by hand (nothing kept between runs,
    /// counters nobody reads, no log).
    public init(
        providerID: String, clock: any StoreClock = SystemClock(), state: ProviderState? = nil,
        metrics: ProviderMetrics = ProviderMetrics(), logger: ProviderLogger = .disabled, directory: String = ".",
        readOnly: Bool = false, pipelineFile: String? = nil
    ) {
        self.providerID = providerID
        self.clock = clock
        self.state = state ?? ProviderState(provider: providerID, store: InMemoryProviderStateStore())
        self.metrics = metrics
        self.logger = logger
        self.directory = directory
        self.readOnly = readOnly
        self.pipelineFile = pipelineFile
    }
}

/// Keeps providers' opaque values between runs: the pipeline's state database, or memory in tests.
public protocol ProviderStateStore: Sendable {
    /// The value `name` of `provider`, or nil.
    func value(provider: String, name: String) throws(CloudSyncError) -> String?
    /// Stores (or, with nil, forgets) the value `name` of `provider`.
    func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError)
}

/// One provider's view of a ``ProviderStateStore``: it sees only its own values.
public struct ProviderState: Sendable {
    /// The provider whose values these are.
    public let provider: String
    let store: any ProviderStateStore

    /// `provider`'s values in `store`.
    public init(provider: String, store: any ProviderStateStore) {
        self.provider = provider
        self.store = store
    }

    /// The value kept under `name`, or nil.
    public func value(_ name: String) throws(CloudSyncError) -> String? {
        try store.value(provider: provider, name: name)
    }

    /// Keeps `value` under `name` (nil forgets it).
    public func set(_ value: String?, for name: String) throws(CloudSyncError) {
        try store.setValue(value, provider: provider, name: name)
    }
}

/// Provider values kept in memory: for tests and programs without a state directory.
public final class InMemoryProviderStateStore: ProviderStateStore {
    private let values = Mutex<[String: String]>([:])

    /// An empty store.
    public init() {}

    /// The value kept in memory, or nil.
    public func value(provider: String, name: String) throws(CloudSyncError) -> String? {
        values.withLock { $0[provider + "\u{0}" + name] }
    }

    /// Keeps (or forgets) the value in memory.
    public func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError) {
        values.withLock { $0[provider + "\u{0}" + name] = value }
    }
}

/// Counters of what one provider asked of its backend, counted where the request happens: one HTTP request, or one
/// local transaction, counts once however the store batched it.
public final class ProviderMetrics: Sendable {
    /// The counters at one moment.
    public struct Reading: Sendable, Equatable, Codable {
        /// Requests made (HTTP requests, or calls into a local store).
        public var requests = 0
        /// Bytes of values read.
        public var bytesRead = 0
        /// Bytes of values written.
        public var bytesWritten = 0
        /// Requests sent again after a failure that may pass.
        public var retries = 0
        /// Answers asking for fewer requests (HTTP 429 and its kin).
        public var throttled = 0
        /// Surplus copies of a key found at the provider (Drive files sharing a key's name).
        public var duplicates = 0
        /// HTTP requests by method and outcome: `GET 2xx`, `PUT 5xx`, `POST failed` (no answer); empty for providers
        /// that make none.
        public var httpRequests: [String: Int] = [:]
        /// Milliseconds requests spent waiting rather than in flight: for a free concurrency slot, and in backoff
        /// before a retry.
        public var waitMilliseconds: Int64 = 0

        /// All zero.
        public init() {}
    }

    private let counters = Mutex(Reading())

    /// Counters at zero.
    public init() {}

    /// Counts one request that read and wrote these many bytes.
    public func recordRequest(bytesRead: Int = 0, bytesWritten: Int = 0) {
        counters.withLock { counters in
            counters.requests += 1
            counters.bytesRead += bytesRead
            counters.bytesWritten += bytesWritten
        }
    }

    /// Counts one HTTP request by method and outcome, with the bytes it sent and received.
    ///
    /// The outcome is the status class (`2xx` ... `5xx`), or `failed` when no answer came (`status` nil).
    public func recordHTTPRequest(method: String, status: Int?, bytesRead: Int = 0, bytesWritten: Int = 0) {
        let outcome = status.map { "\($0 / 100)xx" } ?? "failed"
        counters.withLock { counters in
            counters.requests += 1
            counters.bytesRead += bytesRead
            counters.bytesWritten += bytesWritten
            counters.httpRequests["\(method) \(outcome)", default: 0] += 1
        }
    }

    /// Counts time a request spent waiting (for a concurrency slot, or in backoff).
    public func recordWait(milliseconds: Int64) {
        guard milliseconds > 0 else { return }
        counters.withLock { $0.waitMilliseconds += milliseconds }
    }

    /// Counts one write request and the bytes of the items it stored: a value a provider refused was not written.
    public func recordWrite(_ items: [KeyValue], _ results: [Result<Void, CloudSyncError>]) {
        let written = zip(items, results).reduce(0) { total, pair in
            (try? pair.1.get()) != nil ? total + pair.0.value.utf8.count : total
        }
        recordRequest(bytesWritten: written)
    }

    /// Counts one write request that failed as a whole: nothing was written.
    public func recordFailedWrite() { recordRequest() }

    /// Counts one retry.
    public func recordRetry() { counters.withLock { $0.retries += 1 } }

    /// Counts one throttled answer.
    public func recordThrottled() { counters.withLock { $0.throttled += 1 } }

    /// Counts `count` surplus copies of keys found at the provider.
    public func recordDuplicates(_ count: Int) { counters.withLock { $0.duplicates += count } }

    /// The counters now.
    public var reading: Reading { counters.withLock { $0 } }
}

/// A provider's log: levels, a sink the embedding program chooses, and redaction of the secrets the provider was
/// configured with.
public struct ProviderLogger: Sendable {
    /// How much a message matters.
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error

        /// Orders levels from debug to error.
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    /// Messages below this level are dropped before they are built.
    public var minimumLevel: Level
    /// Texts replaced by `<redacted>` in every message (tokens, keys, passwords of the configuration).
    public var secrets: [String]
    private let sink: (@Sendable (Level, String) -> Void)?

    /// A logger writing messages of `minimumLevel` and above to `sink`, with `secrets` redacted.
    public init(
        minimumLevel: Level = .info, secrets: [String] = [], sink: @escaping @Sendable (Level, String) -> Void
    ) {
        self.minimumLevel = minimumLevel
        self.secrets = secrets
        self.sink = sink
    }

    private init() {
        minimumLevel = .error
        secrets = []
        sink = nil
    }

    /// Drops every message.
    public static let disabled = ProviderLogger()

    /// Logs `message` when `level` is at least ``minimumLevel``; secrets are redacted first.
    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard let sink, level >= minimumLevel else { return }
        sink(level, redact(message()))
    }

    /// `text` with every secret replaced by `<redacted>`.
    public func redact(_ text: String) -> String {
        secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: "<redacted>")
        }
    }

    /// The same logger with every message starting `label: ` (after redaction), so one sink can tell providers
    /// apart.
    public func labelled(_ label: String) -> ProviderLogger {
        guard let sink else { return self }
        return ProviderLogger(minimumLevel: minimumLevel, secrets: secrets) { level, message in
            sink(level, "\(label): \(message)")
        }
    }

    /// The same logger, also redacting `more`.
    public func redacting(_ more: [String]) -> ProviderLogger {
        var copy = self
        copy.secrets += more
        return copy
    }
}
