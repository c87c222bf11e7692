/// Changes to an ``Outbox`` made together, through ``Outbox/batch(now:generation:_:)``: failed writes queued and
/// superseded entries dropped, in order, by the same rules as one at a time, with the storage changed once for all.
///
/// Used only inside the body it is handed to, under the outbox's lock. In the mode that stores at once it changes the
/// queue as it goes and remembers each step, so that ``commit()`` can store the net result in one storage call and
/// ``rollBack()`` can put the queue back when that call fails. In the other mode each change is stored on its own as
/// it is made, exactly as the outbox did before it batched.
final class OutboxBatch {
    /// One change to the queue, remembered so it can be stored at the commit or undone.
    private enum Step {
        case added(OutboxEntry)
        case removed(OutboxEntry)
    }

    private var state: Outbox.State
    private let now: Int64
    /// False when the account changed since the work began: nothing may be queued.
    private let accepting: Bool
    private let limits: Outbox.Limits
    private let backoff: Outbox.Backoff
    private let storage: any OutboxStorage
    private let storesAtOnce: Bool
    private var steps: [Step] = []
    /// Ids from this one on were given out by this batch; those below were already stored.
    private let firstNewID: Int64
    private let oldestHintBefore: Int64
    /// Entries given up by this batch's changes, with why, in the order it gave them up.
    private(set) var dropped: [(OutboxEntry, Outbox.DropReason)] = []
    /// Writes whose entry the storage failed to keep (only when storing each change on its own).
    private(set) var unkept: [KeyFailure] = []

    init(
        state: Outbox.State, now: Int64, accepting: Bool, limits: Outbox.Limits, backoff: Outbox.Backoff,
        storage: any OutboxStorage, storesAtOnce: Bool
    ) {
        self.state = state
        self.now = now
        self.accepting = accepting
        self.limits = limits
        self.backoff = backoff
        self.storage = storage
        self.storesAtOnce = storesAtOnce
        self.firstNewID = state.nextID
        self.oldestHintBefore = state.oldestHint
    }

    /// A batch for a store without an outbox: it queues nothing.
    static var none: OutboxBatch {
        OutboxBatch(
            state: Outbox.State(), now: 0, accepting: false, limits: Outbox.Limits(), backoff: Outbox.Backoff(),
            storage: InMemoryOutboxStorage(), storesAtOnce: false)
    }

    /// Queues a failed write, replacing any entry for the same key and provider; returns false when it could not
    /// be queued (then the write must fail instead), by the rules of ``Outbox/enqueue(_:now:generation:)``.
    func enqueue(_ write: FailedWrite) -> Bool {
        guard accepting else { return false }
        let pair = OutboxPair(key: write.key, provider: write.provider)
        let entry = OutboxEntry(
            id: state.nextID, key: write.key, operation: write.operation, encodedValue: write.encodedValue,
            provider: write.provider, attempts: 1,
            nextAttemptAtMs: now + backoff.delayMilliseconds(afterAttempts: 1, error: write.error),
            enqueuedAtMs: now, lastErrorCode: write.error.code.rawValue)
        let replacing = state.idByPair[pair]
        guard entry.attempts < limits.maxAttempts else {
            // The entry it would replace is older than this write: it goes too.
            if let replacing { _ = removeStored(replacing) }
            dropped.append((entry, .tooManyAttempts))
            return false
        }
        if replacing == nil {
            while state.entries.count >= limits.maxEntries, let oldest = state.oldestID() {
                let evicted = state.entries[oldest]!
                guard removeStored(oldest) else { return false }
                dropped.append((evicted, .queueFull))
            }
        }
        if !storesAtOnce {
            do {
                try storage.replace(entry)
            } catch {
                unkept.append(Self.unkept(write, because: error))
                return false
            }
        }
        if let replacing { forget(replacing) }
        state.insert(entry)
        if storesAtOnce { steps.append(.added(entry)) }
        state.nextID += 1
        return true
    }

    /// A write or remove of `key` reached `provider` directly: the queued entry for that pair, if any, is older and
    /// goes silently (see ``Outbox/superseded(key:provider:)``).
    func superseded(key: String, provider: String) {
        guard let id = state.idByPair[OutboxPair(key: key, provider: provider)] else { return }
        _ = removeStored(id)
    }

    /// Removes the entry `id` from the queue and its storage (at the commit when storing at once); false when the
    /// storage refused, and then the entry stays.
    private func removeStored(_ id: Int64) -> Bool {
        if !storesAtOnce {
            guard (try? storage.delete(ids: [id])) != nil else { return false }
        }
        forget(id)
        return true
    }

    private func forget(_ id: Int64) {
        guard let entry = state.entries[id] else { return }
        if storesAtOnce { steps.append(.removed(entry)) }
        state.remove(id)
    }

    /// Stores what the batch changed in one storage call: the entries it queued that are still queued, and the
    /// removal of the entries stored before it that it dropped (except those a queued entry of the same key and
    /// provider replaces, which storing it removes).
    func commit() throws {
        guard storesAtOnce else { return }
        var storing: [OutboxEntry] = []
        var removed: [OutboxEntry] = []
        for step in steps {
            switch step {
            case .added(let entry) where state.entries[entry.id] != nil: storing.append(entry)
            case .removed(let entry) where entry.id < firstNewID: removed.append(entry)
            default: break
            }
        }
        guard !storing.isEmpty || !removed.isEmpty else { return }
        guard !removed.isEmpty else { return try storage.commit(storing: storing, deleting: []) }
        let replaced = Set(storing.map(OutboxPair.init))
        try storage.commit(storing: storing, deleting: removed.filter { !replaced.contains(OutboxPair($0)) }.map(\.id))
    }

    /// Undoes every change of the batch, after a failed ``commit()``: the queue is as it was before.
    func rollBack() {
        for step in steps.reversed() {
            switch step {
            case .added(let entry): state.remove(entry.id)
            case .removed(let entry): state.insert(entry)
            }
        }
        state.nextID = firstNewID
        state.oldestHint = oldestHintBefore
        steps = []
        dropped = []
    }

    /// Hands the queue's state back, leaving this batch empty.
    func takeState() -> Outbox.State {
        var taken = Outbox.State()
        swap(&taken, &state)
        return taken
    }

    /// The failure reported for a write that could not be queued because the storage failed.
    private static func unkept(_ write: FailedWrite, because storageError: any Error) -> KeyFailure {
        let reason = (storageError as? CloudSyncError)?.message ?? "\(storageError)"
        return KeyFailure(
            key: write.key,
            error: CloudSyncError(
                (storageError as? CloudSyncError)?.code ?? .provider,
                "the \(write.operation == .remove ? "remove" : "write") for \(write.provider) could not be "
                    + "queued in the outbox (\(reason)); it reached only the providers that answered, "
                    + "until a sync repairs it (free space where the state directory is)",
                provider: write.provider, key: write.key))
    }
}
