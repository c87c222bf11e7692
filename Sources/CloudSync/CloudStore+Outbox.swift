/// What one flush of the outbox did.
public struct FlushResult: Sendable, Equatable {
    /// Entries that reached their provider.
    public var drained: Int
    /// Entries still queued (not yet due, their provider unavailable, or failed again for a reason that may pass).
    public var remaining: Int
    /// Entries given up (each reported to the outbox's `onDropped`).
    public var dropped: Int

    /// A flush result, for providers and tests that report one of their own.
    public init(drained: Int, remaining: Int, dropped: Int) {
        self.drained = drained
        self.remaining = remaining
        self.dropped = dropped
    }
}

extension CloudStore {
    /// Retries the queued writes that are due, in batches per provider.
    ///
    /// A retry that fails for a reason that may pass is scheduled again with backoff (or the server's
    /// `retryAfterMs`); one that fails for a reason a person must fix is reported to `onError` and dropped, like an
    /// entry past its last attempt or its maximum age. Entries for unavailable providers wait, without spending an
    /// attempt.
    @discardableResult
    public func flushOutbox() async throws(CloudSyncError) -> FlushResult {
        guard let outbox = options.outbox else { return FlushResult(drained: 0, remaining: 0, dropped: 0) }
        let configured = try configuredProviders() + attachedProviders()
        // Entries belong to the account signed in when this flush began; one that changes meanwhile abandons them.
        let generation = outbox.generation
        let (candidates, expired) = outbox.due(now: options.clock.nowMilliseconds())
        var result = FlushResult(drained: 0, remaining: 0, dropped: expired)
        let keys = Set(candidates.map(\.key))
        await keyLocks.acquire(keys)
        defer { keyLocks.release(keys) }

        let providers = await available(configured.filter { Set(candidates.map(\.provider)).contains($0.id) })
        // Checked again after every wait, under the keys' locks: a direct write may have superseded an entry, and
        // an account switch abandons them all.
        guard outbox.generation == generation else {
            result.remaining = outbox.count
            return result
        }
        let stillQueued = Set(outbox.pending.map(\.id))
        let due = candidates.filter { stillQueued.contains($0.id) }
        let index = Dictionary(uniqueKeysWithValues: providers.enumerated().map { ($1.id, $0) })
        var sets = [[Delivery]](repeating: [], count: providers.count)
        var removes = [[Delivery]](repeating: [], count: providers.count)
        for (item, entry) in due.enumerated() {
            guard let provider = index[entry.provider] else { continue }
            let delivery = Delivery(item: item, key: entry.key, encoded: entry.encodedValue)
            if entry.operation == .set { sets[provider].append(delivery) } else { removes[provider].append(delivery) }
        }
        async let setOutcomes = deliver(.set, sets, to: providers)
        async let removeOutcomes = deliver(.remove, removes, to: providers)
        let outcomes = await setOutcomes.merging(await removeOutcomes) { $0 + $1 }

        let now = options.clock.nowMilliseconds()
        for (item, entry) in due.enumerated() {
            guard let outcome = outcomes[item]?.first?.result else { continue }
            switch outbox.record(entry, outcome: outcome, now: now) {
            case .delivered: result.drained += 1
            case .dropped(let reason):
                result.dropped += 1
                if reason == .notRetryable, case .failure(let error) = outcome { report(error) }
            case .rescheduled, .gone: break
            }
        }
        result.remaining = outbox.count
        return result
    }

    /// The writes waiting in the outbox, oldest first (for a "pending sync" indicator).
    ///
    /// Empty without an outbox.
    public func pendingWrites() -> [OutboxEntry] { options.outbox?.pending ?? [] }

    /// Gives up the queued writes `predicate` selects (all of them by default), reporting each as `discarded`;
    /// returns how many.
    @discardableResult
    public func discardPendingWrites(where predicate: (OutboxEntry) -> Bool = { _ in true }) -> Int {
        options.outbox?.drop(where: predicate, reason: .discarded) ?? 0
    }
}
