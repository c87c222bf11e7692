/// One key-value store over several providers: failover or mirrored writes, read fallthrough, size tiering, key
/// rules, a codec, deadlines, batching, quota, migration and account-change safety.
///
/// Safe to share between tasks. Every provider call is bounded by ``StoreOptions/timeout``.
public final class CloudStore: Sendable {
    struct State {
        var providers: [any Provider]
        /// Providers reachable by id (migrate, verify, rekey, direct reads and writes) outside the preference order.
        var attached: [any Provider] = []
        var availability: [String: (answer: Availability, expiresAtMs: Int64)] = [:]
        /// Bumped on account changes, so a probe that started before one cannot memoise a stale answer.
        var availabilityGeneration = 0
        var providerSubscriptions: [ProviderSubscription] = []
        var recentEventIDs: [String] = []
        var closed = false
    }

    let options: StoreOptions

    /// The clock the store reads the time from and sleeps on (``StoreOptions/clock``); work on top of the store
    /// reads its time here too, so a manual clock governs all of it.
    public var clock: any StoreClock { options.clock }
    let state: Protected<State>
    private let accountEvents: AsyncStream<AccountEvent>.Continuation
    private let accountEventPump: Task<Void, Never>
    let keyLocks = KeyLocks()
    /// Writes that outlived their deadline, so their keys stay locked until they return.
    let abandonedWrites = AbandonedWrites()
    private let accountListeners = Subscribers<AccountEvent>()
    private let remoteListeners = Subscribers<RemoteChange>()
    private let autoFlush = Protected<Task<Void, Never>?>(nil)

    /// A store over `providers`, in preference order.
    ///
    /// Provider ids must be unique.
    ///
    /// `attached` providers can be named in `migrate`, `verify`, `rekey`, `quota` and the single-provider reads and
    /// writes, but take no part in reads, writes, listing or clearing through the store.
    public init(
        providers: [any Provider], attached: [any Provider] = [], options: StoreOptions = StoreOptions()
    ) throws(CloudSyncError) {
        try Self.checkUniqueIDs((providers + attached).map(\.id))
        self.options = options
        self.state = Protected(State(providers: providers, attached: attached))
        let (stream, continuation) = AsyncStream.makeStream(of: AccountEvent.self)
        self.accountEvents = continuation
        let listeners = accountListeners
        let state = self.state
        // One consumer keeps account events in order and finishes clearing caches before listeners hear of them.
        self.accountEventPump = Task {
            for await event in stream {
                if event.identityChanged {
                    // Attached providers too: whatever they remember belongs to the previous account as much.
                    let providers = state.withLock { $0.providers + $0.attached }
                    for provider in providers { await provider.clearCaches() }
                }
                listeners.notify(event)
            }
        }
        for provider in providers + attached { subscribe(to: provider) }
        if options.outbox != nil, let interval = options.autoFlushInterval {
            let clock = options.clock
            autoFlush.withLock { task in
                task = Task { [weak self] in
                    while !Task.isCancelled {
                        do { try await clock.sleep(for: interval) } catch { return }
                        guard let self else { return }
                        _ = try? await self.flushOutbox()
                    }
                }
            }
        }
    }

    deinit {
        accountEvents.finish()
        autoFlush.withLock { $0?.cancel() }
    }

    private static func checkUniqueIDs(_ ids: [String]) throws(CloudSyncError) {
        var seen = Set<String>()
        for id in ids where !seen.insert(id).inserted {
            throw CloudSyncError(
                .config, "two providers share the id \(id); give each provider its own id",
                provider: id)
        }
    }

    /// The configured providers' ids, in preference order.
    public var providerIDs: [String] { state.withLock { $0.providers.map(\.id) } }

    /// Adds `provider` at the end of the preference order (the in-memory provider in tests, for example).
    public func register(_ provider: any Provider) throws(CloudSyncError) {
        try state.withLock { state throws(CloudSyncError) in
            try Self.checkUniqueIDs((state.providers + state.attached).map(\.id) + [provider.id])
            state.providers.append(provider)
        }
        subscribe(to: provider)
    }

    /// Releases provider subscriptions and listeners; every later operation fails with `ERR_CLOSED`.
    public func close() {
        let subscriptions = state.withLock { state in
            state.closed = true
            defer { state.providerSubscriptions = [] }
            return state.providerSubscriptions
        }
        for subscription in subscriptions { subscription.cancel() }
        accountListeners.removeAll()
        remoteListeners.removeAll()
        accountEvents.finish()
        accountEventPump.cancel()
        autoFlush.withLock { $0?.cancel() }
    }

    // MARK: Providers, availability and deadlines

    /// Runs `body` holding `keys`' locks for a write; they are released however it ends.
    ///
    /// First any earlier write of them that outlived its deadline may return (bounded by a second deadline), so that
    /// late call cannot land after this one. `body` gets the (key, provider) pairs whose earlier write is still running
    /// after that wait: it may land after anything sent now, so nothing of those keys may go to those providers (a
    /// value waits in the outbox instead; a file is refused).
    func withWriteLock<T, E: Error>(
        _ keys: Set<StoreKey>, _ body: (_ inFlight: Set<OutboxPair>) async throws(E) -> T
    ) async throws(E) -> T {
        await keyLocks.acquire(keys)
        defer { keyLocks.release(keys) }
        let inFlight = await abandonedWrites.settle(keys, timeout: options.timeout, clock: options.clock)
        return try await body(inFlight)
    }

    /// The error of a change held back from `provider` because an earlier write of `key` to it may still land: it may
    /// pass (the change waits in the outbox until that write returns).
    ///
    /// A file is not queued (it could change before a retry): `file` words the error as a refusal to try again.
    static func heldBehindEarlierWrite(key: String, provider: String, file: Bool = false) -> CloudSyncError {
        CloudSyncError(
            .timeout,
            "an earlier write of this key to \(provider) outlived its deadline and may still land; "
                + (file
                    ? "the file was not sent, so that write cannot overwrite it; put it again once the provider answers"
                    : "this change waits in the outbox until that write returns, so the earlier one cannot overwrite it"),
            provider: provider, key: key)
    }

    /// The configured providers, or `ERR_CLOSED`.
    func configuredProviders() throws(CloudSyncError) -> [any Provider] {
        let (providers, closed) = state.withLock { ($0.providers, $0.closed) }
        guard !closed else { throw CloudSyncError(.closed, "the store was closed; create a new one") }
        return providers
    }

    /// The attached providers, outside the preference order.
    func attachedProviders() -> [any Provider] { state.withLock { $0.attached } }

    func provider(withID id: String) throws(CloudSyncError) -> any Provider {
        guard let provider = try (configuredProviders() + attachedProviders()).first(where: { $0.id == id }) else {
            throw CloudSyncError(
                .config,
                "no provider with id \(id) is configured; configured: \(providerIDs.joined(separator: ", "))",
                provider: id)
        }
        return provider
    }

    /// Whether `providerID` (configured or attached) can serve requests now, and if not, why: signed out, offline,
    /// misconfigured, or ``UnavailableReason/timedOut`` when its probe did not answer within ``StoreOptions/timeout``.
    ///
    /// Lets a report say why a provider was passed over. The answer is memoised for
    /// ``StoreOptions/availabilityLifetime``, shared with the store's own reads and writes.
    public func availability(of providerID: String) async throws(CloudSyncError) -> Availability {
        let provider = try provider(withID: providerID)
        return await availabilities([provider])[providerID] ?? .available
    }

    /// The providers among `candidates` that are available now, in the same order.
    func available(_ candidates: [any Provider]) async -> [any Provider] {
        await availableWithReasons(candidates).providers
    }

    /// The providers among `candidates` that are available now, in the same order, and every candidate's answer
    /// (for ``noProviderError(_:answers:)``).
    func availableWithReasons(_ candidates: [any Provider]) async
        -> (providers: [any Provider], answers: [String: Availability])
    {
        let answers = await availabilities(candidates)
        return (candidates.filter { answers[$0.id]?.isAvailable == true }, answers)
    }

    /// Every candidate's availability, by id.
    ///
    /// Answers are memoised for ``StoreOptions/availabilityLifetime``; the others are probed at once, all together,
    /// each under the deadline, so even several hung probes cost one timeout. A probe that times out is
    /// ``UnavailableReason/timedOut``.
    func availabilities(_ candidates: [any Provider]) async -> [String: Availability] {
        let now = options.clock.nowMilliseconds()
        let (known, generation) = state.withLock { state in
            (
                state.availability.filter { $0.value.expiresAtMs > now }.mapValues(\.answer),
                state.availabilityGeneration
            )
        }
        let unknown = candidates.filter { known[$0.id] == nil }
        var answers = known
        if !unknown.isEmpty {
            let probed = await withTaskGroup(of: (String, Availability).self) { group in
                for provider in unknown {
                    group.addTask { [self] in (provider.id, await probe(provider)) }
                }
                var results: [String: Availability] = [:]
                for await (id, answer) in group { results[id] = answer }
                return results
            }
            let expiry = options.clock.nowMilliseconds() + options.availabilityLifetime.milliseconds
            state.withLock { state in
                guard state.availabilityGeneration == generation else { return }
                for (id, answer) in probed { state.availability[id] = (answer, expiry) }
            }
            answers.merge(probed) { _, new in new }
        }
        return answers
    }

    /// Attempts an availability probe gets within the store's deadline: the first two thirds of it, the second the
    /// rest.
    static let probeAttempts = 2

    /// Asks `provider` within the deadline, asking again when a probe hangs.
    ///
    /// A probe is idempotent, so one that hangs (a request lost on a dead connection) is asked again on a fresh
    /// request, which usually answers at once. The first attempt keeps two thirds of the deadline, so a provider that
    /// is slow but answering (a token refreshed on the way) is not cut short; once the whole deadline has passed the
    /// provider is ``UnavailableReason/timedOut``. Several hung probes still cost one deadline.
    private func probe(_ provider: any Provider) async -> Availability {
        guard let timeout = options.timeout else {
            do {
                return try await dispatcher(for: provider).call { await $0.availability() }
            } catch {
                return .unavailable(.other, "the availability probe failed: \(error.message)")
            }
        }
        let end = options.clock.nowMilliseconds() + timeout.milliseconds
        var attempts = 0
        while attempts < Self.probeAttempts {
            let left = end - options.clock.nowMilliseconds()
            guard left > 0 else { break }
            attempts += 1
            let share = BatchDispatcher(
                provider: provider, timeout: min(timeout * 2 / 3, .milliseconds(left)),
                clock: options.clock, abandoned: nil)
            do {
                return try await share.call { await $0.availability() }
            } catch  where error.code == .timeout {
                continue
            } catch {
                return .unavailable(.other, "the availability probe failed: \(error.message)")
            }
        }
        return .unavailable(
            .timedOut,
            "the availability probe did not answer in \(attempts) attempt\(attempts == 1 ? "" : "s") within "
                + "\(timeout.milliseconds) ms; check that the provider is reachable, or raise the store's timeout")
    }

    /// Forgets every memoised availability answer.
    func forgetAvailability() {
        state.withLock { state in
            state.availability = [:]
            state.availabilityGeneration += 1
        }
    }

    func report(_ error: CloudSyncError) {
        options.onError?(error)
    }

    // MARK: Codec, tiering and key rules

    func codec(for provider: any Provider) -> (any ValueCodec)? {
        options.providerCodecs[provider.id] ?? options.codec
    }

    func encode(_ value: String, key: String, for provider: any Provider) throws(CloudSyncError) -> String {
        try encode(value, key: key, codec: codec(for: provider), provider: provider.id)
    }

    /// `value` encoded with `codec` (the ``codec(for:)`` of the provider named `provider`), looked up once by a
    /// caller encoding many values.
    func encode(_ value: String, key: String, codec: (any ValueCodec)?, provider: String) throws(CloudSyncError)
        -> String
    {
        guard let codec else { return value }
        do {
            return try codec.encode(value, key: key)
        } catch {
            throw CloudSyncError(
                .encode, "the codec could not encode the value: \(error)", provider: provider, key: key)
        }
    }

    func decode(_ stored: String, key: String, from provider: any Provider) throws(CloudSyncError) -> String {
        guard let codec = codec(for: provider) else { return stored }
        do {
            return try codec.decode(stored, key: key)
        } catch {
            throw CloudSyncError(
                .decode,
                "the stored value could not be decoded: \(error); check the codec's keys, or whether the value was "
                    + "written without this codec",
                provider: provider.id, key: key)
        }
    }

    /// The largest encoded value `provider` takes, in bytes: the smallest of its own cap, the configured override
    /// and, with tiering on, its tier's threshold.
    ///
    /// Nil means no cap.
    func cap(of provider: any Provider) -> Int? {
        options.tiering.cap(
            tier: provider.capabilities.tier, declared: provider.capabilities.maxValueBytes,
            override: options.maxValueBytes[provider.id])
    }

    /// `value` encoded with `provider`'s codec, measured against its ``cap(of:)``: the one place the store decides
    /// whether a value fits a provider, so routing, direct writes, read repair, reconcile, migrate and rekey agree.
    ///
    /// Throws only when the codec fails; whether it fits is ``EncodedValue/fits``.
    func encodedValue(_ value: String, key: String, for provider: any Provider) throws(CloudSyncError)
        -> EncodedValue
    {
        let encoded = try encode(value, key: key, for: provider)
        return EncodedValue(encoded: encoded, cap: cap(of: provider), provider: provider.id, key: key)
    }

    /// Throws `ERR_INVALID_KEY` unless `key` satisfies the rules of every configured provider.
    func validate(_ key: String, providers: [any Provider]) throws(CloudSyncError) {
        try validate(key, rules: keyRules(of: providers))
    }

    /// The key rules ``validate(_:rules:)`` checks for `providers`, in order (providers without rules left out, and
    /// none at all unless ``StoreOptions/validateKeys``): read once for a batch of keys, not once per key.
    func keyRules(of providers: [any Provider]) -> [(provider: String, rules: [KeyRule])] {
        guard options.validateKeys else { return [] }
        return providers.compactMap { provider in
            let rules = provider.capabilities.keyRules
            return rules.isEmpty ? nil : (provider.id, rules)
        }
    }

    /// Throws `ERR_INVALID_KEY` unless `key` is not empty and satisfies `rules` (see ``keyRules(of:)``).
    func validate(_ key: String, rules: [(provider: String, rules: [KeyRule])]) throws(CloudSyncError) {
        if !KeyRule.nonEmpty.allows(key) {
            throw CloudSyncError(.invalidKey, "\(KeyRule.nonEmpty); give every value a name", key: key)
        }
        for (provider, providerRules) in rules {
            for rule in providerRules where !rule.allows(key) {
                throw CloudSyncError(
                    .invalidKey,
                    "\(rule) (a rule of provider \(provider)); rename the key, or pass it through sanitizeKey()",
                    provider: provider, key: key)
            }
        }
    }

    // MARK: Events

    private func subscribe(to provider: any Provider) {
        var subscriptions: [ProviderSubscription] = []
        if let subscription = provider.subscribeToAccountChanges({ [weak self] event in self?.receive(event) }) {
            subscriptions.append(subscription)
        }
        if let subscription = provider.subscribeToRemoteChanges({ [weak self] change in self?.receive(change) }) {
            subscriptions.append(subscription)
        }
        state.withLock { $0.providerSubscriptions += subscriptions }
    }

    private func receive(_ event: AccountEvent) {
        let isNew = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            if let id = event.eventID {
                if state.recentEventIDs.contains(id) { return false }
                state.recentEventIDs.append(id)
                if state.recentEventIDs.count > 64 { state.recentEventIDs.removeFirst() }
            }
            if event.identityChanged {
                state.availability = [:]
                state.availabilityGeneration += 1
            }
            return true
        }
        guard isNew else { return }
        // A queued write carries no identity: flushing it now would write the previous user's data into the new
        // user's account.
        if event.identityChanged { options.outbox?.abandonForAccountChange() }
        accountEvents.yield(event)
    }

    private func receive(_ change: RemoteChange) {
        guard !state.withLock({ $0.closed }) else { return }
        remoteListeners.notify(change)
    }

    /// Calls `handler` for account changes of every provider, merged; one system event relayed by two providers
    /// arrives once.
    ///
    /// On an identity change the store has already dropped memoised availability, told the outbox to abandon queued
    /// writes and cleared every provider's caches by the time `handler` runs.
    public func onAccountChange(_ handler: @escaping @Sendable (AccountEvent) -> Void) -> ProviderSubscription {
        accountListeners.add(handler)
    }

    /// Calls `handler` when any provider reports data changed elsewhere.
    public func onRemoteChange(_ handler: @escaping @Sendable (RemoteChange) -> Void) -> ProviderSubscription {
        remoteListeners.add(handler)
    }
}

/// A value encoded for one provider, and whether that provider takes it.
struct EncodedValue {
    let encoded: String
    /// The largest encoded value the provider takes; nil for no cap.
    let cap: Int?
    let provider: String
    let key: String

    /// Size in UTF-8 bytes of the encoded value, the measure every cap uses.
    var size: Int { encoded.utf8.count }

    var fits: Bool { cap.map { size <= $0 } ?? true }

    /// The encoded value, or `ERR_PAYLOAD_TOO_LARGE` when the provider does not take it.
    func fitting() throws(CloudSyncError) -> String {
        guard fits else {
            throw tooLarge("; store a smaller value, or write it to a provider with a larger cap or none")
        }
        return encoded
    }

    /// `ERR_PAYLOAD_TOO_LARGE` naming the size and the cap.
    ///
    /// `advice` is appended to "... more than the N bytes provider p takes".
    func tooLarge(_ advice: String) -> CloudSyncError {
        CloudSyncError(
            .payloadTooLarge,
            "the value is \(size) bytes encoded, more than the \(cap ?? 0) bytes provider \(provider) takes\(advice)",
            provider: provider, key: key)
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    package var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}

extension Array {
    /// Consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
