import CloudSync
import Synchronization

/// Wraps any provider to make it misbehave on cue and to count what the store asks of it.
///
/// Availability, per-operation and per-key errors, latency, hangs, capabilities, quota and account or remote-change
/// events can all be set while a test runs.
public final class FaultInjectingProvider: ForwardingProvider {
    /// The provider calls a test can aim at.
    public enum Operation: String, Sendable, CaseIterable {
        case isAvailable, get, set, remove, list, quota
    }

    /// How a hung call ends.
    public enum Hang: Sendable {
        /// Waits until the store cancels it, as a well-behaved network call does.
        case untilCancelled
        /// Never returns, even when cancelled (a stuck socket, a provider that never checks).
        case forever
    }

    private struct Settings {
        var available = true
        var operationErrors: [Operation: CloudSyncError] = [:]
        var remainingFailures: [Operation: Int] = [:]
        var keyErrors: [StoreKey: CloudSyncError] = [:]
        var hangs: [Operation: Hang] = [:]
        var latency: Duration?
        var calls: [Operation: Int] = [:]
        var keysRequested: [Operation: Int] = [:]
        var clearCachesCalls = 0
        var hanging: [Operation: Int] = [:]
    }

    /// The provider every call is forwarded to once the injected faults let it through.
    public let wrapped: any Provider
    /// The wrapped provider's id unless another was given.
    public let id: String
    /// The wrapped provider's capabilities unless others were given; the store and the wrapper itself act on these (a
    /// wrapper that says it cannot list refuses to).
    public let capabilities: ProviderCapabilities
    private let clock: any StoreClock
    private let settings = Mutex(Settings())
    private let accountListeners = Subscribers<AccountEvent>()
    private let remoteListeners = Subscribers<RemoteChange>()

    /// Wraps `wrapped`, optionally under another id and with other capabilities; latency sleeps on `clock`.
    public init(
        _ wrapped: any Provider, id: String? = nil, capabilities: ProviderCapabilities? = nil,
        clock: any StoreClock = SystemClock()
    ) {
        self.wrapped = wrapped
        self.id = id ?? wrapped.id
        self.capabilities = capabilities ?? wrapped.capabilities
        self.clock = clock
    }

    /// An in-memory provider wrapped for faults.
    public convenience init(
        id: String, capabilities: ProviderCapabilities = .init(), totalBytes: Int64? = nil,
        clock: any StoreClock = SystemClock()
    ) {
        self.init(
            MemoryProvider(id: id, capabilities: capabilities, totalBytes: totalBytes), capabilities: capabilities,
            clock: clock)
    }

    // MARK: Controls

    /// Whether ``availability()`` lets the wrapped provider answer (true, the default) or reports it unavailable with
    /// reason `other`; set it to switch the provider off and on during a test.
    public var isAvailableNow: Bool {
        get { settings.withLock { $0.available } }
        set { settings.withLock { $0.available = newValue } }
    }

    /// Makes `operation` throw `error` for the whole batch, `times` times (nil: until cleared; 0 clears it now).
    public func fail(_ operation: Operation, with error: CloudSyncError, times: Int? = nil) {
        settings.withLock { settings in
            settings.operationErrors[operation] = times == 0 ? nil : error
            settings.remainingFailures[operation] = times == 0 ? nil : times
        }
    }

    /// Makes get, set and remove report `error` for `key` alone (nil clears it).
    public func fail(key: String, with error: CloudSyncError?) {
        settings.withLock { $0.keyErrors[StoreKey(key)] = error }
    }

    /// Makes `operation` hang (nil: answer normally again).
    public func hang(_ operation: Operation, _ hang: Hang? = .untilCancelled) {
        settings.withLock { $0.hangs[operation] = hang }
    }

    /// Waits this long on the clock before every call.
    public func setLatency(_ latency: Duration?) {
        settings.withLock { $0.latency = latency }
    }

    /// Calls made to `operation`.
    public func calls(_ operation: Operation) -> Int { settings.withLock { $0.calls[operation, default: 0] } }

    /// Keys passed to `operation`, over all its calls.
    public func keysRequested(_ operation: Operation) -> Int {
        settings.withLock { $0.keysRequested[operation, default: 0] }
    }

    /// How often `clearCaches()` reached this wrapper.
    public var clearCachesCalls: Int { settings.withLock { $0.clearCachesCalls } }

    /// Whether a call to `operation` is hanging right now.
    public func isHanging(_ operation: Operation) -> Bool {
        settings.withLock { $0.hanging[operation, default: 0] > 0 }
    }

    /// Sets every call and key count back to zero (for ``calls(_:)`` and ``keysRequested(_:)``); injected faults stay
    /// as they are.
    public func resetCounts() {
        settings.withLock { settings in
            settings.calls = [:]
            settings.keysRequested = [:]
        }
    }

    /// Delivers an account event to subscribers, as the provider's platform would.
    public func emitAccountEvent(identityChanged: Bool, status: AccountStatus = .available, eventID: String? = nil) {
        accountListeners.notify(
            AccountEvent(identityChanged: identityChanged, status: status, provider: id, eventID: eventID))
    }

    /// Delivers a remote-change event to subscribers.
    public func emitRemoteChange(keys: [String]?) {
        remoteListeners.notify(RemoteChange(provider: id, keys: keys))
    }

    // MARK: Provider

    /// Counts the call, then waits, hangs or fails as configured.
    private func enter(_ operation: Operation, keys: Int = 0) async throws {
        let (latency, hang, error) = settings.withLock { settings -> (Duration?, Hang?, CloudSyncError?) in
            settings.calls[operation, default: 0] += 1
            settings.keysRequested[operation, default: 0] += keys
            let error = settings.operationErrors[operation]
            if error != nil, let remaining = settings.remainingFailures[operation] {
                if remaining <= 1 {
                    settings.operationErrors[operation] = nil
                    settings.remainingFailures[operation] = nil
                } else {
                    settings.remainingFailures[operation] = remaining - 1
                }
            }
            return (settings.latency, settings.hangs[operation], error)
        }
        if let latency { try await clock.sleep(for: latency) }
        if let hang {
            settings.withLock { $0.hanging[operation, default: 0] += 1 }
            defer { settings.withLock { $0.hanging[operation, default: 0] -= 1 } }
            switch hang {
            case .untilCancelled:
                try await SystemClock().sleep(for: .seconds(86_400 * 365))
            case .forever:
                await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
            }
        }
        if let error { throw error }
    }

    private func keyError(_ key: String) -> CloudSyncError? { settings.withLock { $0.keyErrors[StoreKey(key)] } }

    /// Counts the probe, waits, hangs or fails as configured for `isAvailable`, then answers: unavailable with reason
    /// `other` when an injected failure fires or ``isAvailableNow`` is false, else the wrapped provider's answer.
    public func availability() async -> Availability {
        do { try await enter(.isAvailable) } catch {
            return .unavailable(.other, "the availability probe failed: \(error)")
        }
        guard settings.withLock({ $0.available }) else {
            return .unavailable(.other, "switched off by the test (isAvailableNow = false)")
        }
        return await wrapped.availability()
    }

    /// Counts the call, waits, hangs or throws as configured for `get`, then forwards; a key given its own error with
    /// ``fail(key:with:)`` reads as that error in its slot.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try await enter(.get, keys: keys.count)
        let results = try await wrapped.get(keys)
        return zip(keys, results).map { key, result in keyError(key).map { .failure($0) } ?? result }
    }

    /// Counts the call, waits, hangs or throws as configured for `set`, then forwards every item except those whose key
    /// has its own error, which fail in their slots and are not written.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try await enter(.set, keys: items.count)
        let failing = items.map { keyError($0.key) }
        let passing = zip(items, failing).filter { $1 == nil }.map(\.0)
        var results = try await wrapped.set(passing).makeIterator()
        return failing.map { error in error.map { .failure($0) } ?? results.next()! }
    }

    /// Counts the call, waits, hangs or throws as configured for `remove`, then forwards every key except those with
    /// their own error, which fail in their slots and are not removed.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await enter(.remove, keys: keys.count)
        let failing = keys.map(keyError)
        let passing = zip(keys, failing).filter { $1 == nil }.map(\.0)
        var results = try await wrapped.remove(passing).makeIterator()
        return failing.map { error in error.map { .failure($0) } ?? results.next()! }
    }

    /// A condition this wrapper's capabilities do not take is refused, as a provider without them refuses it.
    private func refusal(of condition: WriteCondition?, key: String) -> CloudSyncError? {
        guard condition != nil, !capabilities.conditionalWrites else { return nil }
        return WriteCondition.unsupported(key: key, provider: id)
    }

    /// ``get(_:)`` with the wrapped provider's version tags.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try await enter(.get, keys: keys.count)
        let results = try await wrapped.getVersioned(keys)
        return zip(keys, results).map { key, result in keyError(key).map { .failure($0) } ?? result }
    }

    /// ``set(_:)`` for conditional writes: the same faults, then the wrapped provider checks the conditions.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        try await enter(.set, keys: items.count)
        let failing = zip(items, conditions).map { keyError($0.key) ?? refusal(of: $1, key: $0.key) }
        let passing = items.indices.filter { failing[$0] == nil }
        var results = try await wrapped.set(passing.map { items[$0] }, conditions: passing.map { conditions[$0] })
            .makeIterator()
        return failing.map { error in error.map { .failure($0) } ?? results.next()! }
    }

    /// ``remove(_:)`` for conditional removals: the same faults, then the wrapped provider checks the conditions.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try await enter(.remove, keys: keys.count)
        let failing = zip(keys, conditions).map { keyError($0) ?? refusal(of: $1, key: $0) }
        let passing = keys.indices.filter { failing[$0] == nil }
        var results = try await wrapped.remove(passing.map { keys[$0] }, conditions: passing.map { conditions[$0] })
            .makeIterator()
        return failing.map { error in error.map { .failure($0) } ?? results.next()! }
    }

    /// Counts the call, waits, hangs or throws as configured for `list`, then forwards; throws `ERR_UNSUPPORTED` when
    /// this wrapper's capabilities say it cannot list.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await enter(.list)
        guard capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: id)
        }
        return try await wrapped.listKeys(after: cursor, limit: limit)
    }

    /// Counts the call, waits, hangs or throws as configured for `quota`, then forwards; nil when this wrapper's
    /// capabilities say it does not report quota.
    public func quota() async throws -> ProviderQuota? {
        try await enter(.quota)
        guard capabilities.reportsQuota else { return nil }
        return try await wrapped.quota()
    }

    /// The test's own events (``emitAccountEvent(identityChanged:status:eventID:)``) and the wrapped provider's, in one subscription.
    public func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
        -> ProviderSubscription?
    {
        guard capabilities.emitsAccountEvents else { return nil }
        return Self.joined(accountListeners.add(handler), wrapped.subscribeToAccountChanges(handler))
    }

    /// The test's own remote changes and the wrapped provider's, in one subscription.
    public func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
        -> ProviderSubscription?
    {
        guard capabilities.emitsRemoteChanges else { return nil }
        return Self.joined(remoteListeners.add(handler), wrapped.subscribeToRemoteChanges(handler))
    }

    private static func joined(_ own: ProviderSubscription, _ inner: ProviderSubscription?) -> ProviderSubscription {
        guard let inner else { return own }
        return ProviderSubscription {
            own.cancel()
            inner.cancel()
        }
    }

    /// Counts the call (see ``clearCachesCalls``) and forwards it.
    public func clearCaches() async {
        settings.withLock { $0.clearCachesCalls += 1 }
        await wrapped.clearCaches()
    }
}
