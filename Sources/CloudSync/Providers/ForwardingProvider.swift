/// A provider that wraps another and forwards every requirement to it, so a wrapper changes only what it means to.
///
/// Metering, fault injection and dry runs are built on it. Adopt it, implement the calls the wrapper changes, and the
/// rest — availability, listing, quota, account and remote-change events, `clearCaches()`, `close()` — reach the
/// wrapped provider unchanged; a wrapper written against ``Provider`` alone would silently drop the events.
///
/// Conditional writes are the one thing not forwarded by default: a wrapper's capabilities say it takes no conditions
/// (``ProviderCapabilities/conditionalWrites`` is false), and reads with versions, conditional writes and removals go
/// through its own ``Provider/get(_:)``, ``Provider/set(_:)`` and ``Provider/remove(_:)``, so a wrapper that changes
/// those (a dry run, fault injection) is never bypassed. A wrapper that passes conditions on implements
/// ``Provider/getVersioned(_:)``, ``Provider/set(_:conditions:)`` and ``Provider/remove(_:conditions:)`` the way it
/// changes the plain calls, and declares the capability.
public protocol ForwardingProvider: Provider {
    /// The provider every call not implemented by the wrapper goes to.
    var wrapped: any Provider { get }
}

extension ForwardingProvider {
    /// The wrapped provider's id.
    public var id: String { wrapped.id }
    /// The wrapped provider's capabilities, but for conditional writes, which a wrapper passes on only when it says
    /// so (see above).
    public var capabilities: ProviderCapabilities {
        var capabilities = wrapped.capabilities
        capabilities.conditionalWrites = false
        return capabilities
    }
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
