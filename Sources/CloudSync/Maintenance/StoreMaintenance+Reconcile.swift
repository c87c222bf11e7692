/// What reconciling a set of keys did.
public struct ReconcileResult: Sendable, Equatable {
    /// Keys looked at, each once.
    public var keys = 0
    /// Keys every provider already held identically.
    public var inSync = 0
    /// Keys written to at least one provider that lacked or disagreed.
    public var repaired = 0
    /// (key, provider) writes passed over because the value is larger than the provider takes.
    public var skipped = 0
    /// Keys that could not be read, decoded or written, and why.
    public var failed: [KeyFailure] = []
    /// (key, provider) writes that failed for a reason that may pass and wait in the outbox.
    public var queued = 0

    /// An empty result, for summing the results of several calls (the sync job reconciles page by page).
    public init() {}
}

extension StoreMaintenance {
    /// Makes `keys` agree across `providerIDs` (all configured providers by default): reads every copy in batches,
    /// picks the winner with the store's resolver (or the preference order when there is none), and writes it to
    /// every available provider that lacks it or disagrees, within each provider's cap.
    public func reconcile(_ keys: [String], among providerIDs: [String]? = nil) async throws(CloudSyncError)
        -> ReconcileResult
    {
        let configured = try store.configuredProviders()
        let chosen =
            providerIDs.map { ids in (configured + store.attachedProviders()).filter { ids.contains($0.id) } }
            ?? configured
        let (providers, answers) = await store.availableWithReasons(chosen)
        guard !providers.isEmpty else { throw store.noProviderError(chosen, answers: answers) }
        let unique = CloudStore.unique(keys)
        // Locked from the read to the last write: a write of one of these keys that landed in between would
        // otherwise be overwritten by the older winner, and no flush may overlap the repairs.
        let locked = unique.keySet()
        return try await store.withWriteLock(locked) { inFlight async throws(CloudSyncError) -> ReconcileResult in
            let generation = store.options.outbox?.generation
            let reads = await store.readEverywhere(unique, from: providers)
            let resolver = store.options.resolver ?? Resolver.custom { $0.first?.value }
            var result = ReconcileResult()
            result.keys = unique.count
            var writes = [[CloudStore.Delivery]](repeating: [], count: providers.count)
            var encodedByItem: [Int: [String: String?]] = [:]
            for (item, key) in unique.enumerated() {
                var candidates: [Candidate] = []
                var holders: [Int: String] = [:]
                var unreadable = Set<Int>()
                var failure: CloudSyncError?
                /// Providers with a change still queued for this key: that change is their copy, and it settles them.
                var settling = Set<Int>()
                for (index, provider) in providers.enumerated() {
                    let copy = store.copy(of: key, on: provider, read: reads[index][item])
                    if copy.queued { settling.insert(index) }
                    switch copy.content {
                    case .value(let value):
                        candidates.append(Candidate(provider: provider.id, value: value))
                        holders[index] = value
                    case .failed(let error):
                        failure = failure ?? error
                        unreadable.insert(index)
                    case .absent, .notAsked:
                        break
                    }
                }
                if let failure {
                    result.failed.append(KeyFailure(key: key, error: failure))
                    continue
                }
                guard let winner = resolver.resolve(candidates) else {
                    result.inSync += 1
                    continue
                }
                var needsWrite = false
                for (index, provider) in providers.enumerated()
                where holders[index] != winner && !unreadable.contains(index) && !settling.contains(index) {
                    do throws(CloudSyncError) {
                        let value = try store.encodedValue(winner, key: key, for: provider)
                        guard value.fits else {
                            result.skipped += 1
                            continue
                        }
                        let encoded = value.encoded
                        writes[index].append(CloudStore.Delivery(item: item, key: key, encoded: encoded))
                        encodedByItem[item, default: [:]][provider.id] = encoded
                        needsWrite = true
                    } catch {
                        result.failed.append(KeyFailure(key: key, error: error))
                    }
                }
                if !needsWrite { result.inSync += 1 }
            }
            let outcomes = await store.deliver(.set, writes, to: providers, holding: inFlight).sorted(by: {
                $0.key < $1.key
            })
            let queuedFlags = store.queueRetryableFailures(
                .set, outcomes.map { ($0.key, $0.value) }, generation: generation, key: { unique[$0] },
                encoded: { item, provider in encodedByItem[item]?[provider] ?? nil })
            for ((item, results), queuedFlags) in zip(outcomes, queuedFlags) {
                let tally = Self.tally(results, queued: queuedFlags, key: unique[item])
                result.queued += tally.queued
                result.failed += tally.failed
                if tally.landed { result.repaired += 1 }
            }
            return result
        }
    }
}
