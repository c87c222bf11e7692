/// A provider that wraps another and forwards every requirement to it, so a wrapper changes only what it means to.
///
/// Metering, fault injection and dry runs are built on it. Adopt it, implement the calls the wrapper changes, and the
/// rest — availability, listing, quota, account and remote-change events, `clearCaches()`, `close()` — reach the
/// wrapped provider unchanged; a wrapper written against ``Provider`` alone would silently drop the events.
///
/// A wrapper that changes ``Provider/set(_:)`` or ``Provider/remove(_:)`` (a dry run that writes nothing) changes
/// ``Provider/set(_:conditions:)`` and ``Provider/remove(_:conditions:)`` the same way: the store sends its
/// conditional writes and removals there, and by default they go straight to the wrapped provider.
public protocol ForwardingProvider: Provider {
    /// The provider every call not implemented by the wrapper goes to.
    var wrapped: any Provider { get }
}

extension ForwardingProvider {
    /// The wrapped provider's id.
    public var id: String { wrapped.id }
    /// The wrapped provider's capabilities.
    public var capabilities: ProviderCapabilities { wrapped.capabilities }
    /// The wrapped provider's answer, reason included.
    public func availability() async -> Availability { await wrapped.availability() }
    /// Reads from the wrapped provider.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await wrapped.get(keys) }
    /// Writes to the wrapped provider.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { try await wrapped.set(items) }
    /// Removes from the wrapped provider.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await wrapped.remove(keys)
    }
    /// Versioned reads from the wrapped provider.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try await wrapped.getVersioned(keys)
    }
    /// Conditional writes to the wrapped provider.
    ///
    /// A wrapper that changes ``set(_:)`` changes this too: the store sends conditional writes here, not there.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    { try await wrapped.set(items, conditions: conditions) }
    /// Conditional removals from the wrapped provider.
    ///
    /// A wrapper that changes ``remove(_:)`` changes this too.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    { try await wrapped.remove(keys, conditions: conditions) }
    /// The wrapped provider's page of keys.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await wrapped.listKeys(after: cursor, limit: limit)
    }
    /// The wrapped provider's quota.
    public func quota() async throws -> ProviderQuota? { try await wrapped.quota() }
    /// The wrapped provider's count of keys.
    public func keyCount() async throws -> Int? { try await wrapped.keyCount() }
    /// The wrapped provider's change-feed position.
    public func changeFeedCursor() async throws -> String? { try await wrapped.changeFeedCursor() }
    /// The wrapped provider's changes since `cursor`.
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        try await wrapped.changes(since: cursor, limit: limit)
    }
    /// Subscribes to the wrapped provider's account events.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    { wrapped.subscribeToAccountChanges(handler) }
    /// Subscribes to the wrapped provider's remote changes.
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    { wrapped.subscribeToRemoteChanges(handler) }
    /// Clears the wrapped provider's caches.
    public func clearCaches() async { await wrapped.clearCaches() }
    /// The wrapped provider's account identity.
    public func accountIdentity() async throws -> String? { try await wrapped.accountIdentity() }
    /// Closes the wrapped provider.
    public func close() async { await wrapped.close() }
}
