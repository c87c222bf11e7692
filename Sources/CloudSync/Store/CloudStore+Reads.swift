extension CloudStore {
    /// The value of `key` from the first available provider that has it, decoded; nil when none has it.
    ///
    /// A provider that fails is reported to ``StoreOptions/onError`` and the read falls through to the next; the
    /// read fails only when no provider could answer at all.
    public func get(_ key: String) async throws(CloudSyncError) -> String? {
        try await fetch([key])[0].get()
    }

    /// The values of `keys`, positionally: a missing key is nil in its place, so results zip against the input.
    ///
    /// Each provider is asked once per batch of at most its ``ProviderCapabilities/batchLimit`` keys, and only for
    /// the keys earlier providers did not have. A key whose only copies cannot be decoded reads as nil (each copy is
    /// reported to ``StoreOptions/onError`` with `ERR_DECODE`) rather than failing the other keys; the call fails
    /// only when a key could not be read at all.
    public func multiGet(_ keys: [String]) async throws(CloudSyncError) -> [String?] {
        var values: [String?] = []
        values.reserveCapacity(keys.count)
        for result in try await fetch(keys) {
            switch result {
            case .success(let value): values.append(value)
            case .failure(let error) where error.code == .decode: values.append(nil)
            case .failure(let error): throw error
            }
        }
        return values
    }

    /// Reads `keys` like ``multiGet(_:)``, one result per key: a value no provider could read or decode fails in
    /// its own slot (`ERR_DECODE` naming the key) instead of reading as missing.
    public func multiGetEach(_ keys: [String]) async throws(CloudSyncError) -> [Result<String?, CloudSyncError>] {
        try await fetch(keys).enumerated().map { index, result in result.mapError { $0.attributed(key: keys[index]) } }
    }

    /// Reads `keys` with fallthrough; one result per key, positionally.
    func fetch(_ keys: [String]) async throws(CloudSyncError) -> [Result<String?, CloudSyncError>] {
        let configured = try configuredProviders()
        for key in Self.unique(keys) { try validate(key, providers: configured) }
        let (providers, answers) = await availableWithReasons(configured)
        guard !providers.isEmpty else { throw noProviderError(configured, answers: answers) }
        if let resolver = options.resolver { return await resolvingFetch(keys, from: providers, resolver: resolver) }

        var found: [StoreKey: String] = [:]
        var firstError: [StoreKey: CloudSyncError] = [:]
        var absentSomewhere = Set<StoreKey>()
        var pending = Self.unique(keys)
        for provider in providers where !pending.isEmpty {
            // A change still queued for this provider is newer than what it holds: read that instead.
            var toRead: [String] = []
            for key in pending {
                switch queuedCopy(of: key, on: provider) {
                case .value(let value): found[StoreKey(key)] = value
                case .absent: absentSomewhere.insert(StoreKey(key))
                case .undecodable(let error): firstError[StoreKey(key)] = firstError[StoreKey(key)] ?? error
                case nil: toRead.append(key)
                }
            }
            try await dispatcher(for: provider).get(toRead) { batch, answer in
                let results: [Result<String?, CloudSyncError>]
                switch answer {
                case .success(let answers):
                    results = answers
                case .failure(let error):
                    report(error)
                    for key in batch where firstError[StoreKey(key)] == nil { firstError[StoreKey(key)] = error }
                    return
                }
                for (key, result) in zip(batch, results) {
                    switch result {
                    case .success(.some(let stored)):
                        do throws(CloudSyncError) {
                            found[StoreKey(key)] = try decode(stored, key: key, from: provider)
                        } catch {
                            // A copy this codec cannot read is skipped and reported, as a resolving read does; the
                            // next provider may hold a readable one.
                            report(error)
                            if firstError[StoreKey(key)] == nil { firstError[StoreKey(key)] = error }
                        }
                    case .success(.none):
                        absentSomewhere.insert(StoreKey(key))
                    case .failure(let error):
                        report(error)
                        if firstError[StoreKey(key)] == nil { firstError[StoreKey(key)] = error }
                    }
                }
            }
            pending.removeAll { found[StoreKey($0)] != nil }
        }
        return keys.map { key in
            if let value = found[StoreKey(key)] { return .success(value) }
            if absentSomewhere.contains(StoreKey(key)) { return .success(nil) }
            return .failure(
                firstError[StoreKey(key)] ?? CloudSyncError(.noProvider, "no provider could be asked", key: key))
        }
    }

    /// What a provider holds for `key` once its queued change lands, when one is queued.
    enum QueuedCopy {
        case value(String)
        case absent
        case undecodable(CloudSyncError)
    }

    /// The queued change of `key` for `provider`, as the value a read would find after it lands; nil when nothing
    /// is queued.
    func queuedCopy(of key: String, on provider: any Provider) -> QueuedCopy? {
        guard let intent = options.outbox?.intent(key: key, provider: provider.id) else { return nil }
        guard intent.operation == .set, let encoded = intent.encodedValue else { return .absent }
        do throws(CloudSyncError) {
            return .value(try decode(encoded, key: key, from: provider))
        } catch {
            return .undecodable(error)
        }
    }

    /// `ERR_NO_PROVIDER` naming each of `configured` with why it is unavailable, so whoever reads it knows what to
    /// fix.
    func noProviderError(_ configured: [any Provider], answers: [String: Availability]) -> CloudSyncError {
        noProviderError(configured, reasons: answers.mapValues(\.description))
    }

    /// `ERR_NO_PROVIDER` naming each of `configured` with the reason it was counted out (its availability answer, or
    /// why a caller left an available one out).
    func noProviderError(_ configured: [any Provider], reasons: [String: String]) -> CloudSyncError {
        guard !configured.isEmpty else {
            return CloudSyncError(.noProvider, "the store has no providers; configure or register one")
        }
        let listed = configured.map { provider in "\(provider.id) (\(reasons[provider.id] ?? "not asked"))" }
        return CloudSyncError(
            .noProvider,
            "none of the configured providers is available: \(listed.joined(separator: "; ")); "
                + "check that each is signed in and reachable")
    }

    static func unique(_ keys: [String]) -> [String] {
        var seen = Set<StoreKey>()
        return keys.filter { seen.insert(StoreKey($0)).inserted }
    }
}
