/// How writes use the provider list.
public enum WriteMode: String, Sendable, Equatable, CaseIterable {
    /// Providers are alternatives: a write or remove touches the first available provider that fits.
    case failover
    /// The same data in several places: a write or remove touches every available provider that fits.
    case mirror
}

/// Whether and how values are routed by size.
public enum Tiering: Sendable, Equatable {
    /// Route by size with the default thresholds: 64 KB for key-value stores, 900 KB for records.
    case auto
    /// Route by size with these thresholds, in UTF-8 bytes of the encoded value.
    case thresholds(kvMaxBytes: Int, recordMaxBytes: Int)
    /// Always write to the preferred available provider, whatever the size.
    case off

    /// The default threshold of key-value stores: 64 KB.
    public static let defaultKVMaxBytes = 64 * 1024
    /// The default threshold of record stores: 900 KB.
    public static let defaultRecordMaxBytes = 900 * 1024

    /// The largest encoded value a provider takes under this tiering: the smallest of its own cap (`declared`), a
    /// configured lower cap (`override`) and, with tiering on, its tier's threshold.
    ///
    /// Nil means no cap.
    package func cap(tier: StorageTier, declared: Int?, override: Int?) -> Int? {
        var caps = [declared, override]
        switch (self, tier) {
        case (.auto, .keyValue): caps.append(Self.defaultKVMaxBytes)
        case (.auto, .record): caps.append(Self.defaultRecordMaxBytes)
        case (.thresholds(let kv, _), .keyValue): caps.append(kv)
        case (.thresholds(_, let record), .record): caps.append(record)
        default: break
        }
        return caps.compactMap { $0 }.min()
    }
}

/// Everything a store is configured with, beside its providers.
public struct StoreOptions: Sendable {
    /// The default ``timeout``: 15 s.
    ///
    /// Long enough for a cloud round trip over a slow link, short enough that a hung provider cannot stall a
    /// scheduled run; pipeline files default to it too.
    public static let defaultTimeout: Duration = .seconds(15)
    /// The default ``availabilityLifetime``: 30 s.
    ///
    /// Saves a probe per call in a burst of calls, yet notices a provider coming back within a run.
    public static let defaultAvailabilityLifetime: Duration = .seconds(30)

    /// Whether writes go to one provider (the reference design's default) or all of them.
    public var writeMode: WriteMode = .failover
    /// Whether values are routed by size, so a large value skips the small key-value stores.
    public var tiering: Tiering = .auto
    /// Per-provider lower caps on the largest value, by provider id, in UTF-8 bytes of the encoded value.
    public var maxValueBytes: [String: Int] = [:]
    /// Check keys against the rules of every configured provider before any request.
    public var validateKeys = true
    /// The deadline of every provider call, the availability probe included; nil waits forever.
    ///
    /// A batch sent as one request per key (``ProviderCapabilities/requestsAtOnce``) gets one deadline per round of those requests.
    public var timeout: Duration? = Self.defaultTimeout
    /// How long an availability answer is trusted before the provider is asked again.
    public var availabilityLifetime: Duration = Self.defaultAvailabilityLifetime
    /// With a resolver, a read consults every available provider and lets it pick the value; without one, a read
    /// returns the first value found.
    public var resolver: Resolver?
    /// After a resolving read, write the winner back to every available provider that disagreed or lacked it.
    public var repairOnRead = true
    /// The codec applied to every provider without one of its own.
    public var codec: (any ValueCodec)?
    /// Codecs for particular providers, by provider id.
    public var providerCodecs: [String: any ValueCodec] = [:]
    /// Told about failures the caller does not see: a mirror destination that failed, a failed provider a read fell
    /// through, an unlistable provider.
    public var onError: (@Sendable (CloudSyncError) -> Void)?
    /// Where writes that failed for a retryable reason wait for a retry; nil rejects them instead.
    public var outbox: Outbox?
    /// With an outbox, flush it this often while the store lives (stopped by `close()`); nil flushes only when
    /// asked.
    public var autoFlushInterval: Duration?
    /// Where time comes from: deadlines, backoff and ages, replaceable so tests need not sleep.
    public var clock: any StoreClock = SystemClock()

    /// The defaults: failover, auto tiering, 15 s timeout, no codec, no outbox.
    public init() {}
}

/// A write or remove that failed on one provider for a reason that may pass.
public struct FailedWrite: Sendable, Equatable {
    /// What the failed change did.
    public enum Operation: String, Sendable, Equatable {
        /// A value was stored.
        case set
        /// A key was removed.
        case remove
    }

    /// The key written or removed.
    public var key: String
    /// Whether it stored or removed.
    public var operation: Operation
    /// The value as the provider would store it (already encoded); nil for a remove.
    public var encodedValue: String?
    /// The provider it failed on, by id.
    public var provider: String
    /// Why it failed; its code decides whether it may be queued.
    public var error: CloudSyncError

    /// A failed change as the store hands it to the outbox; only the store makes them, so this is not library API.
    package init(key: String, operation: Operation, encodedValue: String?, provider: String, error: CloudSyncError) {
        self.key = key
        self.operation = operation
        self.encodedValue = encodedValue
        self.provider = provider
        self.error = error
    }
}
