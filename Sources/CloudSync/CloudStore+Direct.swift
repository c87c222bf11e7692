extension CloudStore {
    /// Every key one provider lists (pages joined), sorted as the provider lists them.
    public func listKeys(of providerID: String) async throws(CloudSyncError) -> [String] {
        let provider = try provider(withID: providerID)
        var keys: [String] = []
        try await forEachPage(of: provider) { page in keys += page }
        return keys
    }

    /// One page of one provider's keys, under the deadline; `ERR_UNSUPPORTED` when it cannot list.
    public func keyPage(of providerID: String, after cursor: String?, limit: Int) async throws(CloudSyncError)
        -> KeyPage
    {
        let provider = try provider(withID: providerID)
        guard provider.capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: providerID)
        }
        return try await deadline(provider) { try await provider.listKeys(after: cursor, limit: limit) }
    }

    /// Removes keys from one provider only, bypassing the write mode, in batches of its limit; one result per key.
    public func remove(_ keys: [String], from providerID: String) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        let provider = try provider(withID: providerID)
        let deliveries = keys.enumerated().map { Delivery(item: $0, key: $1, encoded: nil) }
        let locked = Set(keys)
        await keyLocks.acquire(locked)
        let outcomes = await deliver(.remove, [deliveries], to: [provider])
        keyLocks.release(locked)
        return keys.indices.map { index in
            let result =
                outcomes[index]?.first?.result
                ?? .failure(CloudSyncError(.providerFailure, "no result", provider: providerID, key: keys[index]))
            if case .success = result { options.outbox?.superseded(key: keys[index], provider: providerID) }
            return result
        }
    }

    /// Values of `keys` on one provider only, decoded with its codec, positionally; in batches of its limit.
    public func read(_ keys: [String], from providerID: String) async throws(CloudSyncError) -> [String?] {
        let provider = try provider(withID: providerID)
        var values: [String?] = []
        for chunk in keys.chunked(provider.capabilities.batchLimit) {
            let batch = Array(chunk)
            let answer = try await deadline(provider) { try await provider.get(batch) }
            for (key, result) in zip(batch, try checkedCount(batch.count, provider: provider, answer)) {
                guard let stored = try result.mapError({ $0.attributed(provider: providerID, key: key) }).get() else {
                    values.append(nil)
                    continue
                }
                values.append(try decode(stored, key: key, from: provider))
            }
        }
        return values
    }

    /// Stores items on one provider only, bypassing the write mode: encoded with its codec, refused per key when
    /// larger than it takes; one result per item.
    public func write(_ items: [KeyValue], to providerID: String) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        let provider = try provider(withID: providerID)
        var results = [Result<Void, CloudSyncError>?](repeating: nil, count: items.count)
        var deliveries: [Delivery] = []
        for (index, item) in items.enumerated() {
            do throws(CloudSyncError) {
                try validate(item.key, providers: [provider])
                let encoded = try encode(item.value, key: item.key, for: provider)
                if let cap = cap(of: provider), encoded.utf8.count > cap {
                    throw CloudSyncError(
                        .payloadTooLarge,
                        "the value is \(encoded.utf8.count) bytes encoded; \(providerID) takes at most \(cap)",
                        provider: providerID, key: item.key)
                }
                deliveries.append(Delivery(item: index, key: item.key, encoded: encoded))
            } catch {
                results[index] = .failure(error)
            }
        }
        let keys = Set(deliveries.map(\.key))
        await keyLocks.acquire(keys)
        let outcomes = await deliver(.set, [deliveries], to: [provider])
        keyLocks.release(keys)
        for (index, outcome) in outcomes {
            results[index] = outcome.first?.result
            if case .success = outcome.first?.result {
                options.outbox?.superseded(key: items[index].key, provider: providerID)
            }
        }
        return results.map { $0 ?? .failure(CloudSyncError(.providerFailure, "no result", provider: providerID)) }
    }
}

extension CloudStore {
    /// Writes already-encoded items to one provider in one call under the deadline: the keys written, and the
    /// failures (every key of the batch when the call itself failed).
    func writeBatch(_ items: [KeyValue], to provider: any Provider) async -> (written: [String], failed: [KeyFailure]) {
        guard !items.isEmpty else { return ([], []) }
        do throws(CloudSyncError) {
            let answer = try await deadline(provider) { try await provider.set(items) }
            var written: [String] = []
            var failed: [KeyFailure] = []
            for (item, outcome) in zip(items, try checkedCount(items.count, provider: provider, answer)) {
                switch outcome {
                case .success: written.append(item.key)
                case .failure(let error):
                    failed.append(
                        KeyFailure(key: item.key, error: error.attributed(provider: provider.id, key: item.key)))
                }
            }
            return (written, failed)
        } catch {
            return ([], items.map { KeyFailure(key: $0.key, error: error.attributed(key: $0.key)) })
        }
    }
}
