import CloudSync
import Synchronization

/// A provider that records what reaches it (clearCaches, close) and emits events on cue: what
/// ``ProviderConformanceSuite/runForwarding(_:)`` puts inside a wrapper to see what the wrapper forwards.
public final class ProbeProvider: Provider {
    private struct Calls {
        var clearCaches = 0
        var close = 0
    }

    /// Always `probe`.
    public let id = "probe"
    /// Default capabilities that also promise account and remote-change events, so a wrapper that drops them is caught.
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

    /// Always ``availabilityAnswer``.
    public func availability() async -> Availability { availabilityAnswer }
    /// Values from the probe's own memory, positionally.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await memory.get(keys) }
    /// Stores into the probe's own memory, positionally.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { try await memory.set(items) }
    /// Removes from the probe's own memory, positionally.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await memory.remove(keys)
    }
    /// A page of the probe's own memory.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await memory.listKeys(after: cursor, limit: limit)
    }
    /// Subscribes `handler` to the account events ``sendEvents()`` sends.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    { accountListeners.add(handler) }
    /// Subscribes `handler` to the remote changes ``sendEvents()`` sends.
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    { remoteListeners.add(handler) }
    /// Counts the call (see ``clearCachesCalls``); there is nothing to forget.
    public func clearCaches() async { calls.withLock { $0.clearCaches += 1 } }
    /// Always ``identity``.
    public func accountIdentity() async throws -> String? { identity }
    /// Counts the call (see ``closeCalls``); the probe keeps working after it.
    public func close() async { calls.withLock { $0.close += 1 } }
}
