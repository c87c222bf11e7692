extension CloudStore {
    /// Every key one provider lists (pages joined), sorted as the provider lists them.
    public func listKeys(of providerID: String) async throws(CloudSyncError) -> [String] {
        let provider = try provider(withID: providerID)
        var keys: [String] = []
        try await forEachPage(of: provider) { page in keys += page }
        return keys
    }

    /// What one provider says it can do: its value size limit, batch size, key rules.
    public func capabilities(of providerID: String) throws(CloudSyncError) -> ProviderCapabilities {
        try provider(withID: providerID).capabilities
    }

    /// Whether a value written to one provider through ``write(_:to:)`` is listed with its
    /// ``SyncFingerprint/digest(of:)`` as its version tag, so the tag is known without listing: the provider's tags
    /// are its stored values' digests (``ProviderCapabilities/tagsAreValueDigests``) and no codec changes the value on
    /// the way.
    public func listsWrittenValuesDigests(on providerID: String) throws(CloudSyncError) -> Bool {
        let provider = try provider(withID: providerID)
        return provider.capabilities.tagsAreValueDigests && codec(for: provider) == nil
    }

    /// How many keys one provider holds, where it counts them cheaply (SQLite, memory); nil where it does not, or the
    /// count failed: a total for progress, never a figure to act on.
    public func keyCount(of providerID: String) async -> Int? {
        guard let provider = try? provider(withID: providerID) else { return nil }
        return try? await dispatcher(for: provider).call { try await $0.keyCount() }
    }

    /// One page of one provider's keys, under the deadline; `ERR_UNSUPPORTED` when it cannot list.
    public func keyPage(of providerID: String, after cursor: String?, limit: Int) async throws(CloudSyncError)
        -> KeyPage
    {
        let provider = try provider(withID: providerID)
        guard provider.capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: providerID)
        }
        return try await dispatcher(for: provider).call { try await $0.listKeys(after: cursor, limit: limit) }
    }

    /// Where one provider's change feed stands now, under the store's deadline; nil when it offers none.
    public func changeFeedCursor(of providerID: String) async throws(CloudSyncError) -> String? {
        try await dispatcher(for: try provider(withID: providerID)).call { try await $0.changeFeedCursor() }
    }

    /// One page of one provider's change feed after `cursor`, under the store's deadline.
    public func changes(of providerID: String, since cursor: String, limit: Int) async throws(CloudSyncError)
        -> ChangeFeedAnswer
    {
        try await dispatcher(for: try provider(withID: providerID)).call {
            try await $0.changes(since: cursor, limit: limit)
        }
    }

    /// Removes keys from one provider only, bypassing the write mode, in batches of its limit; one result per key.
    public func remove(_ keys: [String], from providerID: String) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        await directly(.remove, keys.map { KeyValue($0, "") }, on: try provider(withID: providerID)).map {
            $0.map { _ in () }
        }
    }

    /// Removes each key from one provider only if it still holds the value it held when it was copied (its stored
    /// bytes' ``SyncFingerprint/digest(of:)`` is the copy's), so a value written there since is never removed
    /// unseen; one outcome per copy, positionally.
    ///
    /// The store's writers are kept out between the check and the removal (the keys are locked). A provider that
    /// takes conditions (``ProviderCapabilities/conditionalWrites``) removes only the version read, so a writer in
    /// another process that lands in between keeps its value and the key ends ``ConditionalRemoval/changed``; on one
    /// that does not, such a writer can still slip in between the two requests.
    public func removeUnchanged(_ copies: [LandedCopy], from providerID: String) async throws(CloudSyncError)
        -> [ConditionalRemoval]
    {
        guard !copies.isEmpty else { return [] }
        let provider = try provider(withID: providerID)
        let keys = copies.map(\.key)
        let locked = keys.keySet()
        return try await withWriteLock(locked) { inFlight async throws(CloudSyncError) -> [ConditionalRemoval] in
            var outcomes = [ConditionalRemoval](repeating: .changed, count: copies.count)
            let reads = await readEverywhereVersioned(keys, from: [provider])[0]
            var deliveries: [Delivery] = []
            for (index, read) in reads.enumerated() {
                switch read {
                case .success(let stored?):
                    if SyncFingerprint.digest(of: stored.value) == copies[index].sourceDigest {
                        deliveries.append(
                            Delivery(
                                item: index, key: keys[index], encoded: nil,
                                condition: condition(after: read, on: provider)))
                    }
                case .success(nil): outcomes[index] = .absent
                case .failure(let error): outcomes[index] = .failed(error)
                }
            }
            await removeConditionally(deliveries, from: provider, holding: inFlight, outcomes: &outcomes)
            return outcomes
        }
    }

    /// Removes keys from one provider only, each only if it still holds what the caller saw: the version tag given
    /// (a listing's), or for a nil tag what a read just before the removal finds; one outcome per key, positionally.
    ///
    /// A provider that takes conditions (``ProviderCapabilities/conditionalWrites``) checks that when the removal
    /// arrives, so a value another writer landed since is kept (``ConditionalRemoval/changed``). One that does not
    /// removes whatever it holds, as ``remove(_:from:)`` does.
    public func removeAsSeen(_ keys: [String], versions: [String?], from providerID: String)
        async throws(CloudSyncError) -> [ConditionalRemoval]
    {
        precondition(versions.count == keys.count, "one version tag (or nil) per key")
        guard !keys.isEmpty else { return [] }
        let provider = try provider(withID: providerID)
        guard provider.capabilities.conditionalWrites else {
            return try await remove(keys, from: providerID).map { outcome in
                switch outcome {
                case .success: return .removed
                case .failure(let error): return .failed(error)
                }
            }
        }
        return try await withWriteLock(keys.keySet()) {
            inFlight async throws(CloudSyncError) -> [ConditionalRemoval] in
            var outcomes = [ConditionalRemoval](repeating: .removed, count: keys.count)
            var conditions = versions.map { $0.map(WriteCondition.version) }
            let unseen = keys.indices.filter { versions[$0] == nil }
            if !unseen.isEmpty {
                let reads = await readEverywhereVersioned(unseen.map { keys[$0] }, from: [provider])[0]
                for (index, read) in zip(unseen, reads) {
                    switch read {
                    case .success(nil): outcomes[index] = .absent
                    case .failure(let error): outcomes[index] = .failed(error)
                    case .success: conditions[index] = condition(after: read, on: provider)
                    }
                }
            }
            let sent = keys.indices.filter { outcomes[$0] == .removed }
            let deliveries = sent.map { Delivery(item: $0, key: keys[$0], encoded: nil, condition: conditions[$0]) }
            await removeConditionally(deliveries, from: provider, holding: inFlight, outcomes: &outcomes)
            return outcomes
        }
    }

    /// Sends `deliveries` (removals, each item an index into `outcomes`) to `provider` and sets each one's outcome.
    ///
    /// Removed, changed (its condition did not hold) or failed. The caller holds the keys' locks; `holding` are the
    /// pairs whose earlier writes may still land.
    private func removeConditionally(
        _ deliveries: [Delivery], from provider: any Provider, holding: Set<OutboxPair>,
        outcomes: inout [ConditionalRemoval]
    ) async {
        let delivered = await deliver(.remove, [deliveries], to: [provider], holding: holding)
        for delivery in deliveries {
            switch delivered[delivery.item]?.first?.result {
            case .success?:
                options.outbox?.superseded(key: delivery.key, provider: provider.id)
                outcomes[delivery.item] = .removed
            case .failure(let error)? where error.code == .changedSinceRead: outcomes[delivery.item] = .changed
            case .failure(let error)?: outcomes[delivery.item] = .failed(error)
            case nil:
                outcomes[delivery.item] = .failed(
                    CloudSyncError(.provider, "no result", provider: provider.id, key: delivery.key))
            }
        }
    }

    /// Values of `keys` on one provider only, decoded with its codec, positionally; in batches of its limit.
    ///
    /// The first key that cannot be read or decoded throws; ``readEach(_:from:)`` answers for each key instead.
    public func read(_ keys: [String], from providerID: String) async throws(CloudSyncError) -> [String?] {
        var values: [String?] = []
        for result in try await readEach(keys, from: providerID) { values.append(try result.get()) }
        return values
    }

    /// Values of `keys` on one provider only, decoded with its codec, positionally, one result per key.
    ///
    /// A value that cannot be read or decoded fails in its own slot (`ERR_DECODE` naming the key) and the others are
    /// still read. Throws only when the provider does not exist or a whole batch fails.
    public func readEach(_ keys: [String], from providerID: String) async throws(CloudSyncError)
        -> [Result<String?, CloudSyncError>]
    {
        let provider = try provider(withID: providerID)
        var values: [Result<String?, CloudSyncError>] = []
        try await dispatcher(for: provider).get(keys) { batch, answer throws(CloudSyncError) in
            for (key, result) in zip(batch, try answer.get()) {
                do throws(CloudSyncError) {
                    guard let stored = try result.get() else {
                        values.append(.success(nil))
                        continue
                    }
                    values.append(.success(try decode(stored, key: key, from: provider)))
                } catch {
                    values.append(.failure(error.attributed(key: key)))
                }
            }
        }
        return values
    }

    /// Stores items on one provider only, bypassing the write mode: encoded with its codec, refused per key when
    /// larger than it takes; one result per item.
    public func write(_ items: [KeyValue], to providerID: String) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        try await writeVersioned(items, to: providerID).map { $0.map { _ in () } }
    }

    /// ``write(_:to:)``, each success with the version tag the provider gave the stored value where it told one (S3's
    /// ETag, CloudKit's record change tag): the tag its next listing gives the key, unless someone writes it since.
    public func writeVersioned(_ items: [KeyValue], to providerID: String) async throws(CloudSyncError)
        -> [Result<String?, CloudSyncError>]
    {
        let provider = try provider(withID: providerID)
        var results = [Result<String?, CloudSyncError>?](repeating: nil, count: items.count)
        var deliveries: [Delivery] = []
        for (index, item) in items.enumerated() {
            do throws(CloudSyncError) {
                try validate(item.key, providers: [provider])
                let encoded = try encodedValue(item.value, key: item.key, for: provider).fitting()
                deliveries.append(Delivery(item: index, key: item.key, encoded: encoded))
            } catch {
                results[index] = .failure(error)
            }
        }
        let outcomes = await directly(.set, deliveries.map { KeyValue($0.key, $0.encoded ?? "") }, on: provider)
        for (delivery, outcome) in zip(deliveries, outcomes) { results[delivery.item] = outcome }
        return results.map { $0 ?? .failure(CloudSyncError(.provider, "no result", provider: providerID)) }
    }
}

extension CloudStore {
    /// Sends already-encoded sets (or removes) to one provider, bypassing the write mode.
    ///
    /// Batches follow its limit and the deadline; the keys' locks are held so no outbox flush of them overlaps; a
    /// change that lands supersedes the key's queued entry for that provider; a key whose earlier write to it still
    /// runs past a second deadline is not sent (``CloudStore/heldBehindEarlierWrite(key:provider:)``). One result per
    /// item.
    func directly(_ operation: FailedWrite.Operation, _ items: [KeyValue], on provider: any Provider) async
        -> [Delivered]
    {
        guard !items.isEmpty else { return [] }
        let keys = items.map(\.key).keySet()
        return await withWriteLock(keys) { inFlight async -> [Delivered] in
            let deliveries = items.enumerated().map { Delivery(item: $0, key: $1.key, encoded: $1.value) }
            // A key whose earlier write to the provider may still land fails in its slot rather than race it.
            let outcomes = await deliver(operation, [deliveries], to: [provider], holding: inFlight)
            return items.indices.map { index in
                let result =
                    outcomes[index]?.first?.result
                    ?? .failure(CloudSyncError(.provider, "no result", provider: provider.id, key: items[index].key))
                if case .success = result { options.outbox?.superseded(key: items[index].key, provider: provider.id) }
                return result
            }
        }
    }

    /// ``directly(_:_:on:)`` for sets, split into the keys written and the failures.
    func writeBatch(_ items: [KeyValue], to provider: any Provider) async -> (written: [String], failed: [KeyFailure]) {
        var written: [String] = []
        var failed: [KeyFailure] = []
        for (item, result) in zip(items, await directly(.set, items, on: provider)) {
            switch result {
            case .success: written.append(item.key)
            case .failure(let error): failed.append(KeyFailure(key: item.key, error: error))
            }
        }
        return (written, failed)
    }
}
