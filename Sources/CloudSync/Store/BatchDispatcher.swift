/// Sends the store's calls to one provider: each under the store's deadline, keyed calls in batches of the
/// provider's ``ProviderCapabilities/batchLimit``, each batch checked for one result per key, every error naming the
/// provider and, where there is one, the key.
///
/// Every provider call the store makes goes through one of these, so the provider contract is enforced in one place.
struct BatchDispatcher: Sendable {
    let provider: any Provider
    let timeout: Duration?
    let clock: any StoreClock
    /// Where writes that outlived their deadline are registered under their keys, so the keys stay locked until the
    /// provider call actually returns.
    var abandoned: AbandonedWrites?

    /// One batch's answer: one result per key, or the error that failed the whole batch.
    typealias Answer<T> = Result<[Result<T, CloudSyncError>], CloudSyncError>

    var id: String { provider.id }

    /// Runs one provider call under the deadline, turning every failure into a `CloudSyncError` that names the
    /// provider (and `key`, when given).
    ///
    /// `count` is how many keys the call carries: for a provider that sends a request per key
    /// (``ProviderCapabilities/requestsAtOnce``), the deadline grows by one timeout per round of requests.
    func call<T: Sendable>(
        key: String? = nil, writing keys: [String] = [], carrying count: Int = 1,
        _ operation: @escaping @Sendable (any Provider) async throws -> T
    ) async throws(CloudSyncError) -> T {
        let provider = self.provider
        let id = provider.id
        let rounds = provider.capabilities.requestsAtOnce.map { max(1, (count + $0 - 1) / $0) } ?? 1
        let timeout = self.timeout.map { $0 * rounds }
        var onAbandoned: (@Sendable (Task<Void, Never>) -> Void)?
        if !keys.isEmpty, let registry = abandoned {
            onAbandoned = { task in registry.register(task, keys: keys, provider: id) }
        }
        do {
            return try await withDeadline(
                timeout, clock: clock,
                timeoutError: {
                    CloudSyncError(
                        .timeout, "no answer within \(timeout?.milliseconds ?? 0) ms", provider: id, key: key)
                },
                onAbandoned: onAbandoned,
                { try await operation(provider) })
        } catch {
            throw CloudSyncError.wrapping(error, provider: id, key: key)
        }
    }

    /// Sends `items` in batches of the provider's limit, one batch at a time, and hands each batch with its answer
    /// to `body` before sending the next.
    ///
    /// Per-key errors arrive attributed to the provider and their key; a batch that failed, or whose answer did not
    /// hold one result per key, arrives as the batch's error (naming the provider, not a key).
    func forEachBatch<Item: Sendable, T: Sendable>(
        _ items: [Item], key: (Item) -> String, writes: Bool = false,
        call operation: @escaping @Sendable (any Provider, [Item]) async throws -> [Result<T, CloudSyncError>],
        _ body: ([Item], Answer<T>) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        for chunk in items.chunked(provider.capabilities.batchLimit) {
            let batch = Array(chunk)
            let answer: Answer<T>
            do throws(CloudSyncError) {
                let results = try await call(writing: writes ? batch.map(key) : [], carrying: batch.count) {
                    provider in try await operation(provider, batch)
                }
                answer = .success(
                    zip(batch, try checkedCount(batch.count, results)).map { item, result in
                        result.mapError { $0.attributed(provider: id, key: key(item)) }
                    })
            } catch {
                answer = .failure(error)
            }
            try await body(batch, answer)
        }
    }

    /// Reads `keys` batch by batch; see ``forEachBatch(_:key:call:_:)``.
    func get(_ keys: [String], _ body: ([String], Answer<String?>) async throws(CloudSyncError) -> Void)
        async throws(CloudSyncError)
    {
        try await forEachBatch(keys, key: { $0 }, call: { provider, batch in try await provider.get(batch) }, body)
    }

    /// Every key's read, positionally; a failed batch gives its error to each of its keys.
    func get(_ keys: [String]) async -> [Result<String?, CloudSyncError>] {
        await flattened(keys, key: { $0 }, call: { provider, batch in try await provider.get(batch) })
    }

    /// Every item's write, positionally; a failed batch gives its error to each of its items.
    func set(_ items: [KeyValue]) async -> [Result<Void, CloudSyncError>] {
        await flattened(items, key: \.key, writes: true, call: { provider, batch in try await provider.set(batch) })
    }

    /// Every key's removal, positionally; a failed batch gives its error to each of its keys.
    func remove(_ keys: [String]) async -> [Result<Void, CloudSyncError>] {
        await flattened(keys, key: { $0 }, writes: true, call: { provider, batch in try await provider.remove(batch) })
    }

    /// Every key's read with its version tag, positionally; a failed batch gives its error to each of its keys.
    func getVersioned(_ keys: [String]) async -> [Result<VersionedValue?, CloudSyncError>] {
        await flattened(keys, key: { $0 }, call: { provider, batch in try await provider.getVersioned(batch) })
    }

    /// Every item's conditional write (nil condition: unconditional), positionally, with the version tag each
    /// stored value got; a failed batch gives its error to each of its items.
    func set(_ items: [KeyValue], conditions: [WriteCondition?]) async -> [Result<String?, CloudSyncError>] {
        await flattened(
            zip(items, conditions).map(ConditionalChange.init), key: \.item.key, writes: true,
            call: { provider, batch in try await provider.set(batch.map(\.item), conditions: batch.map(\.condition)) })
    }

    /// Every key's conditional removal (nil condition: unconditional), positionally; a failed batch gives its error to
    /// each of its keys.
    func remove(_ keys: [String], conditions: [WriteCondition?]) async -> [Result<Void, CloudSyncError>] {
        await flattened(
            zip(keys, conditions).map(ConditionalChange.init), key: \.item, writes: true,
            call: { provider, batch in try await provider.remove(batch.map(\.item), conditions: batch.map(\.condition))
            }
        )
    }

    /// An item sent with its condition, so batches split both alike.
    private struct ConditionalChange<Item: Sendable>: Sendable {
        var item: Item
        var condition: WriteCondition?
    }

    private func flattened<Item: Sendable, T: Sendable>(
        _ items: [Item], key: @escaping (Item) -> String, writes: Bool = false,
        call operation: @escaping @Sendable (any Provider, [Item]) async throws -> [Result<T, CloudSyncError>]
    ) async -> [Result<T, CloudSyncError>] {
        var results: [Result<T, CloudSyncError>] = []
        results.reserveCapacity(items.count)
        // The body never throws, so neither does the walk.
        try? await forEachBatch(items, key: key, writes: writes, call: operation) { batch, answer in
            switch answer {
            case .success(let answers): results += answers
            case .failure(let error): results += batch.map { .failure(error.concerning(key: key($0))) }
            }
        }
        return results
    }

    /// A provider must return one result per key; anything else breaks the contract and fails the whole batch.
    func checkedCount<T>(_ expected: Int, _ results: [T]) throws(CloudSyncError) -> [T] {
        guard results.count == expected else {
            throw CloudSyncError(
                .provider,
                "provider returned \(results.count) results for \(expected) keys; a provider must return one per key",
                provider: id)
        }
        return results
    }
}

extension CloudStore {
    /// The dispatcher for calls to `provider`, under this store's deadline and clock.
    func dispatcher(for provider: any Provider) -> BatchDispatcher {
        BatchDispatcher(provider: provider, timeout: options.timeout, clock: options.clock, abandoned: abandonedWrites)
    }
}

/// Writes whose provider call outlived the store's deadline and still runs, by key and provider.
///
/// The caller was released at the deadline, but the call may yet land. Whoever takes the key's lock waits for it
/// (bounded by a second deadline); a write still running after that may land after anything sent now, so the key is
/// not written to that provider again until it returns: the newer write waits in the outbox
/// (``CloudStore/withWriteLock(_:_:)`` hands its body the pairs still in flight). A write is forgotten here only once
/// it has returned.
final class AbandonedWrites: Sendable {
    private let running = Protected<[OutboxPair: [Task<Void, Never>]]>([:])

    func register(_ task: Task<Void, Never>, keys: [String], provider: String) {
        let pairs = keys.map { OutboxPair(key: $0, provider: provider) }
        running.withLock { running in for pair in pairs { running[pair, default: []].append(task) } }
        // Forgotten once it has returned, not before: until then the provider may still take it.
        Task { [running] in
            await task.value
            running.withLock { running in
                for pair in pairs {
                    running[pair]?.removeAll { $0 == task }
                    if running[pair]?.isEmpty == true { running[pair] = nil }
                }
            }
        }
    }

    /// Waits until every abandoned write of `keys` has returned, or `timeout` has passed on `clock`; answers the
    /// (key, provider) pairs whose writes were still running at the end.
    @discardableResult
    func settle(_ keys: Set<StoreKey>, timeout: Duration?, clock: any StoreClock) async -> Set<OutboxPair> {
        // Nearly always nothing is abandoned: then no key is looked up.
        let tasks = running.withLock { running in
            running.isEmpty ? [] : running.filter { keys.contains($0.key.key) }.values.flatMap { $0 }
        }
        guard !tasks.isEmpty else { return [] }
        let finished =
            (try? await withDeadline(
                timeout, clock: clock, timeoutError: { CloudSyncError(.timeout, "abandoned writes still running") },
                {
                    for task in tasks { await task.value }
                    return true
                })) ?? false
        return running.withLock { running in
            // All returned: forget them now rather than when their own clean-up runs, so nothing is held back.
            if finished {
                for (pair, waiting) in running where keys.contains(pair.key) {
                    let left = waiting.filter { task in !tasks.contains(task) }
                    running[pair] = left.isEmpty ? nil : left
                }
            }
            return Set(running.keys.filter { keys.contains($0.key) })
        }
    }
}
