/// Where a write or remove went.
public struct WriteReceipt: Sendable, Equatable {
    /// Providers that now hold the change.
    public var stored: [String]
    /// Providers where the change failed for a retryable reason and waits in the outbox.
    public var queued: [String]
    /// Providers passed over because the encoded value is larger than their cap.
    public var skippedTooLarge: [String]

    public init(stored: [String] = [], queued: [String] = [], skippedTooLarge: [String] = []) {
        self.stored = stored
        self.queued = queued
        self.skippedTooLarge = skippedTooLarge
    }
}

/// A key that failed, and why.
public struct KeyFailure: Sendable, Equatable {
    public var key: String
    public var error: CloudSyncError

    public init(key: String, error: CloudSyncError) {
        self.key = key
        self.error = error
    }
}

/// The union of keys across providers, and the providers that could not say what they hold.
public struct KeyListing: Sendable, Equatable {
    /// Every key listed by at least one provider, sorted, each once.
    public var keys: [String]
    /// Providers that cannot list or failed to, by id: keys only they hold are missing from `keys`.
    public var unlisted: [String: CloudSyncError]

    public init(keys: [String], unlisted: [String: CloudSyncError]) {
        self.keys = keys
        self.unlisted = unlisted
    }
}

/// What `clear()` did.
public struct ClearResult: Sendable, Equatable {
    /// Keys removed from every available provider.
    public var removed: Int
    public var failed: [KeyFailure]
    /// Providers whose keys could not be listed: keys only they hold were not removed.
    public var unlisted: [String: CloudSyncError]
}

/// One provider's space, as it reports it.
public struct QuotaEntry: Sendable, Equatable {
    public var provider: String
    public var usedBytes: Int64?
    /// Nil means unlimited, not zero.
    public var totalBytes: Int64?
    /// Set when the provider should know but could not say.
    public var error: CloudSyncError?
}

/// What `migrate` did.
public struct MigrationResult: Sendable, Equatable {
    /// Keys copied to the destination.
    public var copied: [String] = []
    /// Keys listed at the source but holding nothing.
    public var skipped: [String] = []
    public var failed: [KeyFailure] = []
    /// Keys the source listed (after the filter).
    public var total = 0
    /// False when `continueOnError: false` stopped the migration at a failure; `copied + skipped + failed` then
    /// says how far it got.
    public var completed = true
}
