/// Writes that failed for a reason that may pass, waiting to be retried on the provider that failed them.
///
/// Rules it keeps:
/// - **Never older.** It holds at most one entry per (key, provider): a newer failed write replaces the queued one,
///   and a write or remove that reaches the provider directly (`superseded(key:provider:)`) removes it, so a
///   retry can never overwrite a newer value or bring back a removed key.
/// - **Bounded.** At most ``Limits/maxEntries`` (the oldest is evicted), ``Limits/maxAttempts`` attempts each, and
///   ``Limits/maxAge`` of age. Every entry given up is reported to `onDropped` with its reason.
/// - **Durable** as its storage is: with `SQLiteOutboxStorage` an entry is on disk before the write call returns.
///
/// The store drives it: it queues failed writes, flushes due entries (`CloudStore.flushOutbox()`), and abandons
/// everything when an account event says the identity changed. A pipeline run, which checks each provider's account
/// itself, abandons only the entries of a provider whose account changed (`abandonForAccountChange(of:)`) and holds
/// back those of a provider whose account it could not check (`hold(_:)`).
public final class Outbox: Sendable {
    /// Why an entry was given up.
    public enum DropReason: String, Sendable, Equatable {
        /// A retry failed for a reason a person must fix (signed out, quota exceeded).
        case notRetryable
        /// It failed ``Limits/maxAttempts`` times.
        case tooManyAttempts
        /// It waited longer than ``Limits/maxAge``.
        case expired
        /// The queue was full and it was the oldest entry.
        case queueFull
        /// The account's identity changed: the write belonged to the previous user.
        case accountChanged
        /// `discardPendingWrites` was asked to drop it.
        case discarded
    }

    /// How much the outbox holds and for how long, so a provider that never comes back cannot grow it forever.
    public struct Limits: Sendable, Equatable {
        /// The default ``maxEntries``: 1000.
        public static let defaultMaxEntries = 1000
        /// The default ``maxAttempts``: 12, whose backoff waits add up to about an hour.
        public static let defaultMaxAttempts = 12
        /// The default ``maxAge``: 7 days, so a write queued before a weekend still reaches a weekly run.
        public static let defaultMaxAge: Duration = .seconds(7 * 24 * 3600)
        /// The limits an outbox has unless told otherwise (and a pipeline's outbox by default).
        public static let `default` = Limits()

        /// Most entries held; the oldest is evicted (`queueFull`) to make room.
        public var maxEntries = Self.defaultMaxEntries
        /// Attempts per entry, the original write included, before it is dropped (`tooManyAttempts`).
        public var maxAttempts = Self.defaultMaxAttempts
        /// Longest an entry waits before it is dropped (`expired`): a very old write is more likely wrong than
        /// useful.
        public var maxAge: Duration = Self.defaultMaxAge

        /// Limits, each defaulting to the documented value.
        public init(
            maxEntries: Int = Self.defaultMaxEntries, maxAttempts: Int = Self.defaultMaxAttempts,
            maxAge: Duration = Self.defaultMaxAge
        ) {
            self.maxEntries = maxEntries
            self.maxAttempts = maxAttempts
            self.maxAge = maxAge
        }
    }

    /// Exponential backoff with jitter: after the n-th failed attempt the next waits between half and all of
    /// `base × 2^(n-1)`, capped at `maximum`.
    ///
    /// With the defaults (2 s base, 12 attempts, so 11 waits) the waits add
    /// up to between 34 and 68 minutes, about 51 on average: roughly an hour. A server's `retryAfterMs` replaces the
    /// computed wait.
    public struct Backoff: Sendable {
        /// The wait after the first failed attempt; each later wait doubles.
        public var base: Duration = .seconds(2)
        /// The longest single wait, so a long outage is still retried hourly.
        public var maximum: Duration = .seconds(3600)
        /// Returns a number in 0...1; injectable so tests get exact schedules.
        public var jitter: @Sendable () -> Double = { Jitter.next() }

        /// A backoff; tests pass a fixed `jitter` so schedules are exact.
        public init(
            base: Duration = .seconds(2), maximum: Duration = .seconds(3600),
            jitter: @escaping @Sendable () -> Double = { Jitter.next() }
        ) {
            self.base = base
            self.maximum = maximum
            self.jitter = jitter
        }

        /// Milliseconds to wait after `attempts` failed attempts.
        public func delayMilliseconds(afterAttempts attempts: Int) -> Int64 {
            let exponent = min(max(attempts - 1, 0), 40)
            let full = min(Double(base.milliseconds) * pow2(exponent), Double(maximum.milliseconds))
            return Int64((full / 2 + full / 2 * min(max(jitter(), 0), 1)).rounded())
        }

        /// Milliseconds to wait after `attempts` failed attempts, the last with `error`: the server's
        /// `retryAfterMs` when it gave one.
        func delayMilliseconds(afterAttempts attempts: Int, error: CloudSyncError) -> Int64 {
            if let retryAfter = error.retryAfterMs { return Int64(max(retryAfter, 0)) }
            return delayMilliseconds(afterAttempts: attempts)
        }

        private func pow2(_ exponent: Int) -> Double { Double(1 << exponent) }
    }

    struct State: Sendable {
        var entries: [Int64: OutboxEntry] = [:]
        var idByPair: [OutboxPair: Int64] = [:]
        var nextID: Int64 = 1
        /// No entry has an id below this: ids only grow, so finding the oldest is amortised O(1).
        var oldestHint: Int64 = 1
        /// Bumped when the account changes: work begun before it may not be queued after it.
        var generation = 0
        /// Providers whose entries are never due while this outbox is open.
        var held: Set<String> = []

        /// The oldest entry's id, nil when empty.
        mutating func oldestID() -> Int64? {
            while oldestHint < nextID, entries[oldestHint] == nil { oldestHint += 1 }
            return oldestHint < nextID ? oldestHint : nil
        }

        /// Forgets the entry `id` (storage is the caller's business).
        mutating func remove(_ id: Int64) {
            guard let entry = entries.removeValue(forKey: id) else { return }
            if idByPair[OutboxPair(entry)] == id { idByPair[OutboxPair(entry)] = nil }
        }

        /// Holds `entry` again, under its id and as its pair's entry.
        mutating func insert(_ entry: OutboxEntry) {
            entries[entry.id] = entry
            idByPair[OutboxPair(entry)] = entry.id
        }
    }

    /// The limits the outbox enforces.
    public let limits: Limits
    /// How long entries wait between attempts.
    public let backoff: Backoff
    private let storage: any OutboxStorage
    private let onDropped: (@Sendable (OutboxEntry, DropReason) -> Void)?
    private let state: Protected<State>
    private let unkept = Protected<[KeyFailure]>([])

    /// Opens an outbox over `storage`, loading what it already holds.
    public init(
        storage: any OutboxStorage = InMemoryOutboxStorage(), limits: Limits = Limits(), backoff: Backoff = Backoff(),
        onDropped: (@Sendable (OutboxEntry, DropReason) -> Void)? = nil
    ) throws {
        var loaded = State()
        for entry in try storage.loadAll() {
            loaded.entries[entry.id] = entry
            loaded.idByPair[OutboxPair(entry)] = entry.id
            loaded.nextID = max(loaded.nextID, entry.id + 1)
        }
        loaded.oldestHint = loaded.entries.keys.min() ?? loaded.nextID
        self.storage = storage
        self.limits = limits
        self.backoff = backoff
        self.onDropped = onDropped
        self.state = Protected(loaded)
    }

    /// Queued entries, oldest first.
    ///
    /// Their descriptions hold no values.
    public var pending: [OutboxEntry] { state.withLock { $0.entries.values.sorted { $0.id < $1.id } } }

    /// How many entries wait, without copying them.
    public var count: Int { state.withLock { $0.entries.count } }

    /// How many entries wait for each provider; providers with none are absent.
    public var countByProvider: [String: Int] {
        state.withLock { state in
            var counts: [String: Int] = [:]
            for entry in state.entries.values { counts[entry.provider, default: 0] += 1 }
            return counts
        }
    }

    // MARK: Used by the store

    /// The account generation now; work captures it when it starts and hands it back to ``enqueue(_:now:generation:)``.
    var generation: Int { state.withLock { $0.generation } }

    /// What is queued for `key` on `provider`: its operation and, for a set, the encoded value.
    func intent(key: String, provider: String) -> (operation: FailedWrite.Operation, encodedValue: String?)? {
        state.withLock { state in
            state.idByPair[OutboxPair(key: key, provider: provider)].flatMap { state.entries[$0] }.map {
                ($0.operation, $0.encodedValue)
            }
        }
    }

    /// Whether the entry `id` is still queued (not delivered, replaced or dropped since it was read).
    func isQueued(_ id: Int64) -> Bool { state.withLock { $0.entries[id] != nil } }

    /// Queues a failed write, replacing any entry for the same key and provider; returns false when it could not
    /// be stored (then the write must fail instead).
    ///
    /// Refused when the account changed since `generation` (the write belongs to the previous account), and when
    /// the limits allow no retry at all (`maxAttempts` of 1: the failed attempt was the only one), which is reported
    /// as `tooManyAttempts`.
    func enqueue(_ write: FailedWrite, now: Int64, generation: Int? = nil) -> Bool {
        batch(now: now, generation: generation) { $0.enqueue(write) }
    }

    /// Runs `body` with a batch through which it queues failed writes and drops superseded entries, in order,
    /// exactly as separate ``enqueue(_:now:generation:)`` and ``superseded(key:provider:)`` calls would, but
    /// stored together: every change the batch made reaches the storage in one call, one transaction (one fsync with
    /// `SQLiteOutboxStorage`), before this returns.
    ///
    /// Crash safety: the storage commits the whole batch or nothing, and this returns only after the commit, so a
    /// write reported as queued is on disk, and a crash before the commit loses only writes whose calls had not
    /// returned (they were never reported queued). When that one commit fails (a full disk), the queue is put back as
    /// it was and `body` runs again, each change then stored on its own as before batching, so each write is kept or
    /// named in ``takeUnkept()`` by itself; `body` must therefore have no effect besides the batch's and return what
    /// it decided from the batch's answers. Entries dropped meanwhile (evicted, refused) are reported to `onDropped`
    /// after the commit, in order. `body` runs under the outbox's lock: it may not call the outbox itself.
    func batch<T: Sendable>(now: Int64, generation: Int? = nil, _ body: (OutboxBatch) -> T) -> T {
        let (result, dropped, unkept) = state.withLock { state -> (T, [(OutboxEntry, DropReason)], [KeyFailure]) in
            let accepting = generation == nil || generation == state.generation
            // The batch works on the state itself, swapped out rather than copied (a copy would duplicate the
            // queue's dictionaries on its first change).
            var taken = State()
            swap(&taken, &state)
            let batch = OutboxBatch(
                state: consume taken, now: now, accepting: accepting, limits: limits, backoff: backoff,
                storage: storage,
                storesAtOnce: true)
            var result = body(batch)
            do {
                try batch.commit()
            } catch {
                // Nothing was stored: undo the batch and store each change on its own, as before batching.
                batch.rollBack()
                let retried = OutboxBatch(
                    state: batch.takeState(), now: now, accepting: accepting, limits: limits, backoff: backoff,
                    storage: storage, storesAtOnce: false)
                result = body(retried)
                state = retried.takeState()
                return (result, retried.dropped, retried.unkept)
            }
            state = batch.takeState()
            return (result, batch.dropped, batch.unkept)
        }
        for (entry, reason) in dropped { onDropped?(entry, reason) }
        if !unkept.isEmpty { self.unkept.withLock { $0 += unkept } }
        return result
    }

    /// Writes that failed and could not be queued either because the outbox's storage failed (a full disk), each
    /// once: the call hands them over and forgets them.
    public func takeUnkept() -> [KeyFailure] {
        unkept.withLock { unkept in
            defer { unkept.removeAll() }
            return unkept
        }
    }

    /// A write or remove of `key` reached `provider` directly: the queued entry for that pair is older, drop it
    /// silently (it is not lost, it is outdated).
    func superseded(key: String, provider: String) {
        state.withLock { state in
            guard let id = state.idByPair[OutboxPair(key: key, provider: provider)] else { return }
            if (try? storage.delete(ids: [id])) != nil { state.remove(id) }
        }
    }

    /// Entries whose next attempt is due, oldest first, and how many entries past their age were dropped as
    /// expired first.
    func due(now: Int64) -> (due: [OutboxEntry], expired: Int) {
        let (due, expired) = state.withLock { state -> ([OutboxEntry], [OutboxEntry]) in
            let held = state.held
            // A held provider's entries are left exactly as they are: neither retried nor expired.
            let candidates = state.entries.values.filter { !held.contains($0.provider) }
            var expired = candidates.filter { isExpired($0, now: now) }
            if !expired.isEmpty {
                if (try? storage.delete(ids: expired.map(\.id))) != nil {
                    for entry in expired { state.remove(entry.id) }
                } else {
                    // Not deleted, so not dropped: they stay queued (and are not retried) until a later flush
                    // manages to delete them.
                    let stuck = Set(expired.map(\.id))
                    expired = []
                    return (
                        candidates.filter { $0.nextAttemptAtMs <= now && !stuck.contains($0.id) }
                            .sorted { $0.id < $1.id }, expired
                    )
                }
            }
            let expiredIDs = Set(expired.map(\.id))
            return (
                candidates.filter { $0.nextAttemptAtMs <= now && !expiredIDs.contains($0.id) }.sorted { $0.id < $1.id },
                expired
            )
        }
        for entry in expired.sorted(by: { $0.id < $1.id }) { onDropped?(entry, .expired) }
        return (due, expired.count)
    }

    /// What recording a retry's outcome did.
    enum Recorded: Equatable {
        /// The entry was delivered and is gone.
        case delivered
        /// It failed for a reason that may pass and waits for its next attempt.
        case rescheduled
        /// It was given up for this reason.
        case dropped(DropReason)
        /// It was no longer queued (replaced by a newer write, or abandoned for an account change meanwhile).
        case gone
    }

    /// What a retry's outcome makes of an entry, by the outbox's rules and limits.
    package enum Disposition: Equatable, Sendable {
        /// It reached its provider: remove it.
        case delivered
        /// Give it up for this reason: remove it and report it.
        case dropped(DropReason)
        /// Keep it, as this entry: one more attempt counted, its next attempt scheduled.
        case rescheduled(OutboxEntry)
    }

    /// What `outcome`, a retry of `entry` ending at `now`, makes of it.
    ///
    /// Success delivers it, a failure that cannot pass drops it, one that may pass schedules the next attempt with
    /// backoff (or the server's `retryAfterMs`), or drops it after the last attempt. Runners that deliver entries
    /// from shared storage themselves (a PostgreSQL outbox's drain) apply the same rules through this.
    package func disposition(of entry: OutboxEntry, outcome: Result<Void, CloudSyncError>, now: Int64)
        -> Disposition
    {
        switch outcome {
        case .success:
            return .delivered
        case .failure(let error) where !error.isRetryable:
            return .dropped(.notRetryable)
        case .failure(let error):
            var next = entry
            next.attempts += 1
            next.lastErrorCode = error.code.rawValue
            guard next.attempts < limits.maxAttempts else { return .dropped(.tooManyAttempts) }
            next.nextAttemptAtMs = now + wait(after: next.attempts, error: error)
            return .rescheduled(next)
        }
    }

    /// Whether `entry` has waited longer than ``Limits/maxAge`` at `now`, so it is dropped as expired, not retried.
    package func isExpired(_ entry: OutboxEntry, now: Int64) -> Bool {
        now - entry.enqueuedAtMs > limits.maxAge.milliseconds
    }

    /// Records a retry's outcome: success or a failure that cannot pass removes the entry; a failure that may pass
    /// schedules the next attempt, or drops the entry after the last one.
    @discardableResult
    func record(_ entry: OutboxEntry, outcome: Result<Void, CloudSyncError>, now: Int64) -> Recorded {
        var recorded = Recorded.gone
        let (drop, removed) = state.withLock { state -> (DropReason?, OutboxEntry?) in
            // A newer write for the pair may have replaced this entry while it was in flight; leave that one be.
            guard let current = state.entries[entry.id] else { return (nil, nil) }
            var drop: DropReason?
            switch disposition(of: current, outcome: outcome, now: now) {
            case .delivered:
                break
            case .dropped(let reason):
                drop = reason
            case .rescheduled(let next):
                if (try? storage.update([next])) != nil { state.entries[next.id] = next }
                recorded = .rescheduled
                return (nil, nil)
            }
            guard (try? storage.delete(ids: [current.id])) != nil else {
                recorded = .rescheduled
                return (nil, nil)
            }
            state.remove(current.id)
            recorded = drop.map(Recorded.dropped) ?? .delivered
            return (drop, current)
        }
        if let drop, let removed { onDropped?(removed, drop) }
        return recorded
    }

    /// Loads the queue again from its storage, after entries were delivered, rescheduled or dropped there without
    /// this outbox (by runners sharing one PostgreSQL outbox); the account generation and held providers stay.
    ///
    /// Only while nothing else uses this outbox: a write queued meanwhile would be forgotten if storage lacks it.
    package func reload() throws {
        let loaded = try storage.loadAll()
        state.withLock { state in
            state.entries = [:]
            state.idByPair = [:]
            for entry in loaded {
                state.insert(entry)
                state.nextID = max(state.nextID, entry.id + 1)
            }
            state.oldestHint = state.entries.keys.min() ?? state.nextID
        }
    }

    /// Gives up every entry: the account's identity changed.
    ///
    /// Work begun before this may no longer queue anything.
    package func abandonForAccountChange() {
        state.withLock { $0.generation += 1 }
        drop(where: { _ in true }, reason: .accountChanged)
    }

    /// Gives up the entries queued for `provider`, whose account's identity changed; returns how many.
    ///
    /// Entries for other providers were queued for accounts that did not change and stay. Work begun before this
    /// may no longer queue anything, for any provider (the same rule as ``abandonForAccountChange()``).
    @discardableResult
    package func abandonForAccountChange(of provider: String) -> Int {
        state.withLock { $0.generation += 1 }
        return drop(where: { $0.provider == provider }, reason: .accountChanged)
    }

    /// Holds back the entries queued for `provider` for as long as this outbox is open: they are never due, so no
    /// flush sends them and none expires, and they stay stored, unchanged, for a later open; returns how many it
    /// holds now.
    ///
    /// For a provider whose account cannot be checked: whoever is signed in may not be the user they were queued
    /// for. Writes made meanwhile still replace and supersede them as usual.
    @discardableResult
    package func hold(_ provider: String) -> Int {
        state.withLock { state in
            state.held.insert(provider)
            return state.entries.values.filter { $0.provider == provider }.count
        }
    }

    /// How many entries are queued for each held provider (held ones with none included).
    package var held: [String: Int] {
        state.withLock { state in
            Dictionary(
                uniqueKeysWithValues: state.held.map { provider in
                    (provider, state.entries.values.filter { $0.provider == provider }.count)
                })
        }
    }

    /// Gives up the entries `predicate` selects, reporting each with `reason`; returns how many.
    @discardableResult
    func drop(where predicate: (OutboxEntry) -> Bool, reason: DropReason) -> Int {
        let dropped = state.withLock { state -> [OutboxEntry] in
            let chosen = state.entries.values.filter(predicate).sorted { $0.id < $1.id }
            guard !chosen.isEmpty, (try? storage.delete(ids: chosen.map(\.id))) != nil else { return [] }
            for entry in chosen { state.remove(entry.id) }
            return chosen
        }
        for entry in dropped { onDropped?(entry, reason) }
        return dropped.count
    }

    private func wait(after attempts: Int, error: CloudSyncError) -> Int64 {
        backoff.delayMilliseconds(afterAttempts: attempts, error: error)
    }
}
