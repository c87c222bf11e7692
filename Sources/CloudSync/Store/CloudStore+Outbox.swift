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
        let (due, expired) = outbox.due(now: options.clock.nowMilliseconds())
        let wanted = Set(due.map(\.provider))
        let providers = await available(configured.filter { wanted.contains($0.id) })
        // Each provider's sets and removes go in batches of its limit, providers at once; a batch holds only its own
        // keys' locks, so no write waits on a flush longer than one call's deadline.
        var result = await withTaskGroup(of: FlushResult.self) { group in
            for provider in providers {
                for operation in [FailedWrite.Operation.set, .remove] {
                    let entries = due.filter { $0.provider == provider.id && $0.operation == operation }
                    guard !entries.isEmpty else { continue }
                    group.addTask { [self] in
                        await flush(entries, to: provider, outbox: outbox, generation: generation)
                    }
                }
            }
            var total = FlushResult(drained: 0, remaining: 0, dropped: expired)
            for await part in group {
                total.drained += part.drained
                total.dropped += part.dropped
            }
            return total
        }
        result.remaining = outbox.count
        return result
    }

    /// Delivers one provider's due entries of one operation, a batch at a time, each under its keys' locks.
    private func flush(_ entries: [OutboxEntry], to provider: any Provider, outbox: Outbox, generation: Int) async
        -> FlushResult
    {
        var tally = FlushResult(drained: 0, remaining: 0, dropped: 0)
        let dispatcher = dispatcher(for: provider)
        for chunk in entries.chunked(provider.capabilities.batchLimit) {
            let superseded = await withWriteLock(chunk.map(\.key).keySet()) { inFlight -> Bool in
                // Checked after the wait, under the locks: a direct write may have superseded an entry meanwhile, and
                // an account switch abandons them all.
                guard outbox.generation == generation else { return true }
                // An entry whose earlier write to the provider still runs waits, without spending an attempt: sent
                // now, it could be overwritten by that write when it lands.
                let batch = chunk.filter { entry in
                    outbox.isQueued(entry.id)
                        && !inFlight.contains(OutboxPair(key: entry.key, provider: entry.provider))
                }
                let outcomes =
                    batch.first?.operation == .set
                    ? await dispatcher.set(batch.map { KeyValue($0.key, $0.encodedValue ?? "") })
                    : await dispatcher.remove(batch.map(\.key))
                let now = options.clock.nowMilliseconds()
                for (entry, outcome) in zip(batch, outcomes) {
                    switch outbox.record(entry, outcome: outcome, now: now) {
                    case .delivered: tally.drained += 1
                    case .dropped(let reason):
                        tally.dropped += 1
                        if reason == .notRetryable, case .failure(let error) = outcome { report(error) }
                    case .rescheduled, .gone: break
                    }
                }
                return false
            }
            if superseded { return tally }
        }
        return tally
    }

    /// Sends queued entries that storage shared by several runners handed out (they are one provider's and one
    /// operation's, their values as stored), under their keys' locks and in batches of the provider's limit; one
    /// result per entry.
    ///
    /// It leaves this store's own outbox alone: the storage records each outcome with the entries' claim, and the
    /// outbox is reloaded from it once every runner is done (``Outbox/reload()``).
    package func deliverQueued(_ entries: [OutboxEntry], to providerID: String) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        let provider = try provider(withID: providerID)
        let dispatcher = dispatcher(for: provider)
        var outcomes: [Result<Void, CloudSyncError>] = []
        outcomes.reserveCapacity(entries.count)
        for chunk in entries.chunked(provider.capabilities.batchLimit) {
            let (held, results) = await withWriteLock(chunk.map(\.key).keySet()) { inFlight in
                // A key whose earlier write still runs is not sent: it fails in its slot, to be retried later.
                let held = chunk.map { inFlight.contains(OutboxPair(key: $0.key, provider: providerID)) }
                let sent = zip(chunk, held).filter { !$1 }.map(\.0)
                return (
                    held,
                    sent.first?.operation == .remove
                        ? await dispatcher.remove(sent.map(\.key))
                        : await dispatcher.set(sent.map { KeyValue($0.key, $0.encodedValue ?? "") })
                )
            }
            var answers = results.makeIterator()
            for (entry, held) in zip(chunk, held) {
                outcomes.append(
                    held
                        ? .failure(Self.heldBehindEarlierWrite(key: entry.key, provider: providerID))
                        : answers.next()
                            ?? .failure(CloudSyncError(.provider, "no result", provider: providerID, key: entry.key)))
            }
        }
        return outcomes
    }

    /// The writes waiting in the outbox, oldest first (for a "pending sync" indicator), each with the value as the
    /// caller wrote it (decoded with its provider's codec).
    ///
    /// Empty without an outbox.
    public func pendingWrites() -> [PendingWrite] {
        // The providers looked up once, not per entry (a closed store has none: values stay undecoded).
        let providers = Dictionary(
            ((try? configuredProviders()).map { $0 + attachedProviders() } ?? []).map { ($0.id, $0) },
            uniquingKeysWith: { first, _ in first })
        return (options.outbox?.pending ?? []).map { entry in
            let value = entry.encodedValue.flatMap { encoded -> String? in
                guard let provider = providers[entry.provider] else { return nil }
                return try? decode(encoded, key: entry.key, from: provider)
            }
            return PendingWrite(entry: entry, value: value)
        }
    }

    /// Gives up the queued writes `predicate` selects (all of them by default), reporting each as `discarded`;
    /// returns how many.
    @discardableResult
    public func discardPendingWrites(where predicate: (OutboxEntry) -> Bool = { _ in true }) -> Int {
        options.outbox?.drop(where: predicate, reason: .discarded) ?? 0
    }
}

/// A write waiting in the outbox as ``CloudStore/pendingWrites()`` shows it: the queued entry (its fields read
/// through, as `write.key`), and the value the caller wrote.
@dynamicMemberLookup
public struct PendingWrite: Sendable, Equatable {
    /// The entry as the outbox keeps it; its `encodedValue` is what the provider will store (encrypted, with a codec).
    public let entry: OutboxEntry
    /// The value as the caller wrote it: `encodedValue` decoded with the provider's codec; nil for a remove, or when
    /// it no longer decodes (the codec's key was replaced since).
    public let value: String?

    /// A field of ``entry``.
    public subscript<T>(dynamicMember field: KeyPath<OutboxEntry, T>) -> T { entry[keyPath: field] }
}
