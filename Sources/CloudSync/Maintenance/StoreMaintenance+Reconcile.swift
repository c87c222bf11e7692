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
            // Work begun under one account is never queued under the next.
            let generation = store.options.outbox?.generation
            let reads = await store.readEverywhere(unique, from: providers)
            let resolver = store.options.resolver ?? Resolver.custom { $0.first?.value }
            var result = ReconcileResult()
            result.keys = unique.count
            var repairs = Repairs(providers: providers.count)
            for (item, key) in unique.enumerated() {
                let copies = KeyCopies(of: key, item: item, on: providers, reads: reads, store: store)
                if let failure = copies.failure {
                    result.failed.append(KeyFailure(key: key, error: failure))
                    continue
                }
                guard let winner = resolver.resolve(copies.candidates),
                    planRepairs(of: key, item: item, to: winner, copies: copies, on: providers, into: &repairs, &result)
                else {
                    result.inSync += 1
                    continue
                }
            }
            await deliver(
                repairs, of: unique, to: providers, holding: inFlight, generation: generation, into: &result)
            return result
        }
    }

    /// One key's copies on the providers a reconcile reads, as it weighs them.
    private struct KeyCopies {
        var candidates: [Candidate] = []
        /// The value each provider holding one holds, by the provider's index.
        var holders: [Int: String] = [:]
        /// Providers whose copy could not be read or decoded: left alone.
        var unreadable = Set<Int>()
        /// Providers with a change still queued for this key: that change is their copy, and it settles them.
        var settling = Set<Int>()
        /// The first copy's error when one could not be read or decoded: the key is not reconciled.
        var failure: CloudSyncError?

        init(
            of key: String, item: Int, on providers: [any Provider], reads: [[Result<String?, CloudSyncError>]],
            store: CloudStore
        ) {
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
        }
    }

    /// The writes a reconcile sends, by provider index, and what each item sends each provider (for the outbox).
    private struct Repairs {
        var writes: [[CloudStore.Delivery]]
        var encodedByItem: [Int: [String: String?]] = [:]

        init(providers: Int) { writes = Array(repeating: [], count: providers) }
    }

    /// Adds a write of `winner` for each provider whose copy differs and may be written; answers whether there is one.
    ///
    /// A provider may be written when its copy was readable and no queued change settles it; one too small for the
    /// value is counted as skipped, an encoding failure as failed.
    private func planRepairs(
        of key: String, item: Int, to winner: String, copies: KeyCopies, on providers: [any Provider],
        into repairs: inout Repairs, _ result: inout ReconcileResult
    ) -> Bool {
        var needsWrite = false
        for (index, provider) in providers.enumerated()
        where copies.holders[index] != winner && !copies.unreadable.contains(index)
            && !copies.settling.contains(index)
        {
            do throws(CloudSyncError) {
                let value = try store.encodedValue(winner, key: key, for: provider)
                guard value.fits else {
                    result.skipped += 1
                    continue
                }
                repairs.writes[index].append(CloudStore.Delivery(item: item, key: key, encoded: value.encoded))
                repairs.encodedByItem[item, default: [:]][provider.id] = value.encoded
                needsWrite = true
            } catch {
                result.failed.append(KeyFailure(key: key, error: error))
            }
        }
        return needsWrite
    }

    /// Sends the repairs, all providers at once, queues the failures that may pass, and counts each key's outcome.
    private func deliver(
        _ repairs: Repairs, of keys: [String], to providers: [any Provider], holding inFlight: Set<OutboxPair>,
        generation: Int?, into result: inout ReconcileResult
    ) async {
        let outcomes = await store.deliver(.set, repairs.writes, to: providers, holding: inFlight).sorted(by: {
            $0.key < $1.key
        })
        let queuedFlags = store.queueRetryableFailures(
            .set, outcomes.map { ($0.key, $0.value) }, generation: generation, key: { keys[$0] },
            encoded: { item, provider in repairs.encodedByItem[item]?[provider] ?? nil })
        for ((item, results), queuedFlags) in zip(outcomes, queuedFlags) {
            let tally = Self.tally(results, queued: queuedFlags, key: keys[item])
            result.queued += tally.queued
            result.failed += tally.failed
            if tally.landed { result.repaired += 1 }
        }
    }
}
