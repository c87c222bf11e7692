/// A stored value with the provider's version tag of it.
public struct VersionedValue: Sendable, Equatable {
    /// The value, as stored (encoded when a codec applies).
    public var value: String
    /// The provider's tag of this stored value (S3's ETag, CloudKit's record change tag, a SQLite value's digest);
    /// nil when the provider has none.
    public var version: String?

    /// `value`, tagged `version`.
    public init(_ value: String, version: String?) {
        self.value = value
        self.version = version
    }
}

/// What a conditional write or removal requires of the key when it arrives at the provider.
public enum WriteCondition: Sendable, Hashable {
    /// The key must not be stored (S3's `If-None-Match: *`, a CloudKit `create`).
    case absent
    /// The key must hold the value this version tag names (S3's `If-Match`, a CloudKit record change tag).
    case version(String)

    /// Whether a key holding `stored` (nil: not stored) meets the condition, for providers that check it themselves
    /// under their own lock.
    public func holds(for stored: String?, version: (String) -> String) -> Bool {
        holds(forTag: stored.map(version))
    }

    /// Whether a key whose stored value has the version tag `tag` (nil: not stored) meets the condition.
    public func holds(forTag tag: String?) -> Bool {
        switch self {
        case .absent: return tag == nil
        case .version(let expected): return tag == expected
        }
    }

    /// The error of a conditional change to `key` sent to `provider`, which takes no conditions: the slot's failure.
    public static func unsupported(key: String, provider: String) -> CloudSyncError {
        CloudSyncError(
            .unsupported, "this provider cannot make a write or removal conditional", provider: provider, key: key)
    }

    /// The error of a conditional change to `key` on `provider` that found it changed: the slot's failure.
    public func unmet(key: String, provider: String) -> CloudSyncError {
        let expected: String
        switch self {
        case .absent: expected = "absent"
        case .version(let tag): expected = "at version \(tag)"
        }
        return CloudSyncError(
            .changedSinceRead,
            "the key was no longer \(expected) when the change arrived: another writer changed it since it was "
                + "read, so it was left as that writer left it",
            provider: provider, key: key)
    }
}

extension Provider {
    /// Reads with ``get(_:)``; tags each value with its digest where the provider's tags are value digests, and
    /// leaves the rest untagged.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        let digests = capabilities.tagsAreValueDigests
        return try await get(keys).map { read in
            read.map { value in
                value.map { VersionedValue($0, version: digests ? SyncFingerprint.digest(of: $0) : nil) }
            }
        }
    }

    /// Without ``ProviderCapabilities/conditionalWrites``: unconditional items through ``set(_:)``, tagged with their
    /// digest where that is the provider's tag; a conditional one fails with `ERR_UNSUPPORTED`.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        let digests = capabilities.tagsAreValueDigests
        return try await unconditionally(items, conditions: conditions, key: \.key, send: set) { item in
            digests ? SyncFingerprint.digest(of: item.value) : nil
        }
    }

    /// Without ``ProviderCapabilities/conditionalWrites``: unconditional keys through ``remove(_:)``; a conditional
    /// one fails with `ERR_UNSUPPORTED`.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try await unconditionally(keys, conditions: conditions, key: \.self, send: remove) { _ in () }
    }

    private func unconditionally<Item, T>(
        _ items: [Item], conditions: [WriteCondition?], key: (Item) -> String,
        send: ([Item]) async throws -> [Result<Void, CloudSyncError>], answer: (Item) -> T
    ) async throws -> [Result<T, CloudSyncError>] {
        precondition(conditions.count == items.count, "one condition (or nil) per item")
        let plain = items.indices.filter { conditions[$0] == nil }
        var results = items.map { item -> Result<T, CloudSyncError> in
            .failure(WriteCondition.unsupported(key: key(item), provider: id))
        }
        guard !plain.isEmpty else { return results }
        let sent = try await send(plain.map { items[$0] })
        guard sent.count == plain.count else {
            throw CloudSyncError(
                .provider, "provider returned \(sent.count) results for \(plain.count) keys", provider: id)
        }
        for (index, outcome) in zip(plain, sent) { results[index] = outcome.map { answer(items[index]) } }
        return results
    }
}
