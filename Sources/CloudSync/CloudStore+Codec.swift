/// What `verify` found.
public struct VerifyResult: Sendable, Equatable {
    /// Keys read.
    public var checked = 0
    /// Keys whose value decodes.
    public var ok = 0
    /// Keys whose value does not, with why (never the value).
    public var failed: [KeyFailure] = []
}

extension CloudStore {
    /// Reads every value of one provider and checks that its codec decodes it; values are never returned or printed.
    ///
    /// Works page by page and batch by batch, so a large provider is never held in memory.
    public func verify(provider id: String) async throws(CloudSyncError) -> VerifyResult {
        let provider = try provider(withID: id)
        var result = VerifyResult()
        try await forEachStoredBatch(of: provider) { batch throws(CloudSyncError) in
            for (key, read) in batch {
                result.checked += 1
                do throws(CloudSyncError) {
                    guard let stored = try read.get() else { continue }
                    _ = try decode(stored, key: key, from: provider)
                    result.ok += 1
                } catch {
                    result.failed.append(KeyFailure(key: key, error: error))
                }
            }
        }
        return result
    }

    /// Re-encodes every value of one provider with its codec's current key, reported like a migration: `copied` are
    /// the values re-encoded, `skipped` those already current (or empty), `failed` those that could not be decoded
    /// or written.
    ///
    /// With a codec that allows plaintext, this is also how an existing plaintext store becomes encrypted.
    public func rekey(provider id: String) async throws(CloudSyncError) -> MigrationResult {
        let provider = try provider(withID: id)
        guard let codec = codec(for: provider) else {
            throw CloudSyncError(
                .config, "provider \(id) has no codec, so there is nothing to re-key with", provider: id)
        }
        var result = MigrationResult()
        try await forEachStoredBatch(of: provider) { batch throws(CloudSyncError) in
            var rewrites: [KeyValue] = []
            for (key, read) in batch {
                result.total += 1
                do throws(CloudSyncError) {
                    guard let stored = try read.get(), !stored.isEmpty, !codec.isCurrent(stored) else {
                        result.skipped.append(key)
                        continue
                    }
                    let decoded = try decode(stored, key: key, from: provider)
                    rewrites.append(KeyValue(key, try encodedValue(decoded, key: key, for: provider).fitting()))
                } catch {
                    result.failed.append(KeyFailure(key: key, error: error))
                }
            }
            let (written, failed) = await writeBatch(rewrites, to: provider)
            result.copied += written
            result.failed += failed
        }
        return result
    }

    /// Lists one provider page by page and reads each page in batches of its limit, handing each batch's raw
    /// results to `body`.
    func forEachStoredBatch(
        of provider: any Provider,
        _ body: ([(String, Result<String?, CloudSyncError>)]) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        try await forEachPage(of: provider) { page throws(CloudSyncError) in
            try await dispatcher(for: provider).get(page) { keys, answer throws(CloudSyncError) in
                try await body(Array(zip(keys, try answer.get())))
            }
        }
    }
}
