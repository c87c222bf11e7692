/// A provider that wraps another and forwards every requirement to it, so a wrapper changes only what it means to.
///
/// Metering, fault injection and dry runs are built on it. Adopt it, implement the calls the wrapper changes, and the
/// rest — availability, listing, quota, account and remote-change events, `clearCaches()`, `close()` — reach the
/// wrapped provider unchanged; a wrapper written against ``Provider`` alone would silently drop the events.
public protocol ForwardingProvider: Provider {
    /// The provider every call not implemented by the wrapper goes to.
    var wrapped: any Provider { get }
}

extension ForwardingProvider {
    public var id: String { wrapped.id }
    public var capabilities: ProviderCapabilities { wrapped.capabilities }
    public func availability() async -> Availability { await wrapped.availability() }
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await wrapped.get(keys) }
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { try await wrapped.set(items) }
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await wrapped.remove(keys)
    }
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await wrapped.listKeys(after: cursor, limit: limit)
    }
    public func quota() async throws -> ProviderQuota? { try await wrapped.quota() }
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    { wrapped.subscribeToAccountChanges(handler) }
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    { wrapped.subscribeToRemoteChanges(handler) }
    public func clearCaches() async { await wrapped.clearCaches() }
    public func accountIdentity() async throws -> String? { try await wrapped.accountIdentity() }
    public func close() async { await wrapped.close() }
}
