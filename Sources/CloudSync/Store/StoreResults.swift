/// Where a write or remove went.
public struct WriteReceipt: Sendable, Equatable {
    /// Providers that now hold the change.
    public var stored: [String]
    /// Providers where the change failed for a retryable reason and waits in the outbox.
    public var queued: [String]
    /// Providers passed over because the encoded value is larger than their cap.
    public var skippedTooLarge: [String]

    /// A receipt, for comparing in tests and building in wrappers.
    public init(stored: [String] = [], queued: [String] = [], skippedTooLarge: [String] = []) {
        self.stored = stored
        self.queued = queued
        self.skippedTooLarge = skippedTooLarge
    }
}

/// A key that failed, and why.
public struct KeyFailure: Sendable, Equatable {
    /// The key concerned.
    public var key: String
    /// Why it failed, with the provider that failed it.
    public var error: CloudSyncError

    /// A failure of `key`.
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

    /// A listing, for comparing in tests.
    public init(keys: [String], unlisted: [String: CloudSyncError]) {
        self.keys = keys
        self.unlisted = unlisted
    }
}

/// What `clear()` did.
public struct ClearResult: Sendable, Equatable {
    /// Keys removed from at least one provider directly (the rest of their removes, if any, wait in the outbox).
    public var removed: Int
    /// Keys no provider could be reached for: their removes all wait in the outbox.
    public var queued: Int = 0
    /// Keys at least one provider failed to remove; they may still be readable.
    public var failed: [KeyFailure]
    /// Providers whose keys could not be listed: keys only they hold were not removed.
    public var unlisted: [String: CloudSyncError]
}

/// One provider's space, as it reports it.
public struct QuotaEntry: Sendable, Equatable {
    /// The provider, by id.
    public var provider: String
    /// Bytes in use; nil when the provider did not say.
    public var usedBytes: Int64?
    /// Nil means unlimited, not zero.
    public var totalBytes: Int64?
    /// Set when the provider should know but could not say.
    public var error: CloudSyncError?
}

/// Whether a migration replaces a value the destination already holds.
public enum Overwrite: String, Sendable, CaseIterable {
    /// Always write the source's value (the default).
    case always
    /// Write only keys the destination lacks.
    case ifMissing
    /// Write keys the destination lacks or holds with another value (compared decoded, so two codecs compare
    /// plaintext); an equal value costs no write.
    case ifDifferent

    /// Whether `incoming` is written over a key that holds `current` (nil: holds nothing); pass both decoded, so
    /// two codecs compare plaintext.
    public func writes(_ incoming: String, over current: String?) -> Bool {
        guard let current else { return true }
        switch self {
        case .always: return true
        case .ifMissing: return false
        case .ifDifferent: return !current.utf8.elementsEqual(incoming.utf8)
        }
    }
}

/// What `migrateByPage` did, in counts.
public struct MigrationCounts: Sendable, Equatable {
    /// Keys copied to the destination.
    public var copied = 0
    /// Keys skipped: absent at the source when read (an empty value is a value, and is copied), or (without
    /// overwrite) already at the destination.
    public var skipped = 0
    /// Keys the destination already held with the source's value, so nothing was written (``Overwrite/ifDifferent``).
    public var unchanged = 0
    /// Keys that could not be read, decoded or written.
    public var failed = 0
    /// False when it stopped early (`continueOnError: false` at a failure, or `shouldStop`).
    public var completed = true

    /// No keys yet.
    public init() {}

    /// Adds `batch`'s keys to these (whether it completed is left as it is).
    mutating func add(_ batch: MigrationCounts) {
        copied += batch.copied
        skipped += batch.skipped
        unchanged += batch.unchanged
        failed += batch.failed
    }
}

/// What a migration did, key by key.
public struct MigrationResult: Sendable, Equatable {
    /// Keys copied to the destination.
    public var copied: [String] = []
    /// Keys listed at the source but absent when read, or (without overwrite) already at the destination; an empty
    /// value is a value, and is copied.
    public var skipped: [String] = []
    /// Keys that could not be read, decoded or written, and why.
    public var failed: [KeyFailure] = []
    /// Keys the source listed (after the filter).
    public var total = 0
    /// False when `continueOnError: false` stopped the migration at a failure; `copied + skipped + failed` then
    /// says how far it got.
    public var completed = true
}

/// A key a copy landed: the destination acknowledged holding the source's value, whose stored bytes at the source
/// had this ``SyncFingerprint/digest(of:)``.
public struct LandedCopy: Sendable, Equatable {
    /// The key.
    public var key: String
    /// The digest of the value as the source stored it when it was copied.
    public var sourceDigest: String

    /// The copy of `key`, whose source value had `sourceDigest`.
    public init(key: String, sourceDigest: String) {
        self.key = key
        self.sourceDigest = sourceDigest
    }
}

/// How ``CloudStore/removeUnchanged(_:from:)`` ended for one key.
public enum ConditionalRemoval: Sendable, Equatable {
    /// The provider held the copied value, and it was removed.
    case removed
    /// The provider holds another value now (written after the copy): left in place.
    case changed
    /// The provider no longer held the key.
    case absent
    /// Reading or removing failed.
    case failed(CloudSyncError)
}
