import CloudSync
import Synchronization

/// A provider that records what reaches it (clearCaches, close) and emits events on cue: what
/// ``ProviderConformanceSuite/runForwarding(_:)`` puts inside a wrapper to see what the wrapper forwards.
public final class ProbeProvider: Provider {
    private struct Calls {
        var clearCaches = 0
        var close = 0
    }

    public let id = "probe"
    public let capabilities = ProviderCapabilities(emitsAccountEvents: true, emitsRemoteChanges: true)
    /// Its answer to `availability()`: unavailable with a reason, so a wrapper that invents its own is caught.
    public let availabilityAnswer = Availability.unavailable(.signedOut, "the probe's own reason")
    /// Its answer to `accountIdentity()`.
    public let identity = "probe-account-1"
    private let memory = MemoryProvider(id: "probe")
    private let calls = Mutex(Calls())
    private let accountListeners = Subscribers<AccountEvent>()
    private let remoteListeners = Subscribers<RemoteChange>()

    /// A probe with no values.
    public init() {}

    /// How often `clearCaches()` reached it.
    public var clearCachesCalls: Int { calls.withLock { $0.clearCaches } }
    /// How often `close()` reached it.
    public var closeCalls: Int { calls.withLock { $0.close } }

    /// Sends one account event and one remote change to every subscriber.
    public func sendEvents() {
        accountListeners.notify(AccountEvent(identityChanged: true, status: .available, provider: id))
        remoteListeners.notify(RemoteChange(provider: id, keys: ["probe.key"]))
    }

    public func availability() async -> Availability { availabilityAnswer }
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await memory.get(keys) }
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { try await memory.set(items) }
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await memory.remove(keys)
    }
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await memory.listKeys(after: cursor, limit: limit)
    }
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    { accountListeners.add(handler) }
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    { remoteListeners.add(handler) }
    public func clearCaches() async { calls.withLock { $0.clearCaches += 1 } }
    public func accountIdentity() async throws -> String? { identity }
    public func close() async { calls.withLock { $0.close += 1 } }
}
