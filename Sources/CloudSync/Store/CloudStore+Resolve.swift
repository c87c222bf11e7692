extension CloudStore {
    /// One key's copies across providers, as a resolving read collects them.
    private struct Copies {
        /// Decoded values in preference order, by index into the available providers.
        var candidates: [(provider: Int, value: String)] = []
        /// Providers that answered for this key, with a value or with "absent".
        var answered = Set<Int>()
        var firstError: CloudSyncError?
    }

    /// Reads `keys` from every provider (one batch call per provider per batch limit), resolves each key, and
    /// repairs the providers that disagreed, in batches.
    ///
    /// Repair failures are reported, never thrown.
    func resolvingFetch(_ keys: [String], from providers: [any Provider], resolver: Resolver) async
        -> [Result<String?, CloudSyncError>]
    {
        let unique = Self.unique(keys)
        // The keys stay locked from the read to the repair: a write that landed in between would otherwise be
        // overwritten by the older winner.
        let locked = unique.keySet()
        return await withWriteLock(locked) { inFlight async -> [Result<String?, CloudSyncError>] in
            let reads = await readEverywhereVersioned(unique, from: providers)
            let (copies, queued) = gatherCopies(of: unique, on: providers, reads: reads)
            var resolved: [StoreKey: Result<String?, CloudSyncError>] = [:]
            var repairs = [[Delivery]](repeating: [], count: providers.count)
            for (item, key) in unique.enumerated() {
                let copy = copies[item]
                if copy.candidates.isEmpty {
                    resolved[StoreKey(key)] =
                        copy.answered.isEmpty
                        ? .failure(
                            copy.firstError ?? CloudSyncError(.noProvider, "no provider could be asked", key: key))
                        : .success(nil)
                    continue
                }
                let candidates = copy.candidates.map { Candidate(provider: providers[$0.provider].id, value: $0.value) }
                let winner = resolver.resolve(candidates)
                resolved[StoreKey(key)] = .success(winner)
                guard let winner, options.repairOnRead else { continue }
                let agreeing = Set(copy.candidates.filter { $0.value == winner }.map(\.provider))
                for index in copy.answered.subtracting(agreeing) where !queued[index].contains(item) {
                    if var delivery = repair(winner, key: key, item: item, on: providers[index]) {
                        // A repair never overwrites a value another writer landed after the read.
                        delivery.condition = condition(after: reads[index][item], on: providers[index])
                        repairs[index].append(delivery)
                    }
                }
            }
            await deliverRepairs(repairs, of: unique, to: providers, holding: inFlight)
            return keys.map { resolved[StoreKey($0)]! }
        }
    }

    /// Each key's copies across `providers` (positional, like `keys`), and for each provider the items whose copy is
    /// a change still queued for it (such a copy is not repaired: that change settles it).
    ///
    /// A copy that cannot be read or decoded is reported and left alone: overwriting it could destroy data a different
    /// key configuration would read.
    private func gatherCopies(
        of keys: [String], on providers: [any Provider], reads: [[Result<VersionedValue?, CloudSyncError>]]
    ) -> (copies: [Copies], queued: [Set<Int>]) {
        var copies = [Copies](repeating: Copies(), count: keys.count)
        var queued = [Set<Int>](repeating: [], count: providers.count)
        for (index, provider) in providers.enumerated() {
            for (item, key) in keys.enumerated() {
                let copy = copy(of: key, on: provider, read: reads[index][item].map { $0?.value })
                if copy.queued { queued[index].insert(item) }
                switch copy.content {
                case .value(let value):
                    copies[item].candidates.append((index, value))
                    copies[item].answered.insert(index)
                case .absent:
                    copies[item].answered.insert(index)
                case .failed(let error):
                    report(error)
                    if copies[item].firstError == nil { copies[item].firstError = error }
                case .notAsked:
                    break
                }
            }
        }
        return (copies, queued)
    }

    /// Sends the read repairs, all providers at once; a repair that lands supersedes what waited for its key and
    /// provider, one another writer's value refused stands (the next read resolves it), and any other failure is
    /// reported.
    private func deliverRepairs(
        _ repairs: [[Delivery]], of keys: [String], to providers: [any Provider], holding inFlight: Set<OutboxPair>
    ) async {
        guard repairs.contains(where: { !$0.isEmpty }) else { return }
        let outcomes = await deliver(.set, repairs, to: providers, holding: inFlight)
        for (item, results) in outcomes {
            for outcome in results {
                switch outcome.result {
                case .success: options.outbox?.superseded(key: keys[item], provider: outcome.provider)
                case .failure(let error) where error.code == .changedSinceRead: break
                case .failure(let error): report(error)
                }
            }
        }
    }

    /// The repair write of `winner` to `provider`, or nil when it cannot take it (too large, codec failure).
    private func repair(_ winner: String, key: String, item: Int, on provider: any Provider) -> Delivery? {
        do throws(CloudSyncError) {
            let value = try encodedValue(winner, key: key, for: provider)
            return value.fits ? Delivery(item: item, key: key, encoded: value.encoded) : nil
        } catch {
            report(error)
            return nil
        }
    }

    /// One provider's copy of a key as reads see it.
    struct ProviderCopy {
        enum Content {
            case value(String)
            case absent
            /// It could not be read, or not decoded.
            case failed(CloudSyncError)
            /// The provider was not asked for it.
            case notAsked
        }

        var content: Content
        /// Whether a change still queued for the provider stands for its copy (it will hold that once it lands).
        var queued: Bool
    }

    /// The copy of `key` on `provider`: its queued change when one waits, which is newer than anything it holds,
    /// else what it answered to `read`, decoded.
    func copy(of key: String, on provider: any Provider, read: Result<String?, CloudSyncError>?) -> ProviderCopy {
        switch queuedCopy(of: key, on: provider) {
        case .value(let value): return ProviderCopy(content: .value(value), queued: true)
        case .absent: return ProviderCopy(content: .absent, queued: true)
        case .undecodable(let error): return ProviderCopy(content: .failed(error), queued: true)
        case nil: break
        }
        switch read {
        case .success(.some(let stored)):
            do throws(CloudSyncError) {
                return ProviderCopy(content: .value(try decode(stored, key: key, from: provider)), queued: false)
            } catch {
                return ProviderCopy(content: .failed(error), queued: false)
            }
        case .success(.none): return ProviderCopy(content: .absent, queued: false)
        case .failure(let error): return ProviderCopy(content: .failed(error), queued: false)
        case nil: return ProviderCopy(content: .notAsked, queued: false)
        }
    }

    /// Every provider's answer for every key, all providers at once, each in batches of its limit: `[p][i]` is
    /// provider `p`'s answer for `keys[i]`.
    ///
    /// A batch that fails gives its error to each of its keys.
    func readEverywhere(_ keys: [String], from providers: [any Provider]) async
        -> [[Result<String?, CloudSyncError>]]
    {
        await everywhere(providers) { dispatcher in await dispatcher.get(keys) }
    }

    /// ``readEverywhere(_:from:)`` for reads a conditional change follows: a provider that takes conditions and
    /// tags values with something other than their digest answers with its tags (S3's ETag), so
    /// ``condition(after:on:)`` can name what was read.
    func readEverywhereVersioned(_ keys: [String], from providers: [any Provider]) async
        -> [[Result<VersionedValue?, CloudSyncError>]]
    {
        await everywhere(providers) { dispatcher in
            let capabilities = dispatcher.provider.capabilities
            guard capabilities.conditionalWrites, !capabilities.tagsAreValueDigests else {
                // No tag to ask for: none is needed, or the value's digest is it.
                return await dispatcher.get(keys).map { read in read.map { $0.map { VersionedValue($0, version: nil) } }
                }
            }
            return await dispatcher.getVersioned(keys)
        }
    }

    /// What a change of a key sent after `read` must find on `provider` for nothing to have landed in between: the
    /// version read, or absence; nil when the provider takes no conditions or the read failed or told no version.
    func condition(after read: Result<VersionedValue?, CloudSyncError>?, on provider: any Provider) -> WriteCondition? {
        let capabilities = provider.capabilities
        guard capabilities.conditionalWrites, case .success(let stored)? = read else { return nil }
        guard let stored else { return .absent }
        if let version = stored.version { return .version(version) }
        return capabilities.tagsAreValueDigests ? .version(SyncFingerprint.digest(of: stored.value)) : nil
    }

    private func everywhere<T: Sendable>(
        _ providers: [any Provider], _ read: @escaping @Sendable (BatchDispatcher) async -> [T]
    ) async -> [[T]] {
        await withTaskGroup(of: (Int, [T]).self) { group in
            for (index, provider) in providers.enumerated() {
                group.addTask { [self] in (index, await read(dispatcher(for: provider))) }
            }
            var answers = [[T]](repeating: [], count: providers.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers
        }
    }
}
