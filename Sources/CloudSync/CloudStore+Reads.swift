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
    /// the keys earlier providers did not have.
    public func multiGet(_ keys: [String]) async throws(CloudSyncError) -> [String?] {
        var values: [String?] = []
        values.reserveCapacity(keys.count)
        for result in try await fetch(keys) { values.append(try result.get()) }
        return values
    }

    /// Reads `keys` with fallthrough; one result per key, positionally.
    func fetch(_ keys: [String]) async throws(CloudSyncError) -> [Result<String?, CloudSyncError>] {
        let configured = try configuredProviders()
        for key in Set(keys) { try validate(key, providers: configured) }
        let (providers, answers) = await availableWithReasons(configured)
        guard !providers.isEmpty else { throw noProviderError(configured, answers: answers) }
        if let resolver = options.resolver { return await resolvingFetch(keys, from: providers, resolver: resolver) }

        var found: [String: Result<String?, CloudSyncError>] = [:]
        var firstError: [String: CloudSyncError] = [:]
        var absentSomewhere = Set<String>()
        var pending = Self.unique(keys)
        for provider in providers where !pending.isEmpty {
            try await dispatcher(for: provider).get(pending) { batch, answer in
                let results: [Result<String?, CloudSyncError>]
                switch answer {
                case .success(let answers):
                    results = answers
                case .failure(let error):
                    report(error)
                    for key in batch where firstError[key] == nil { firstError[key] = error }
                    return
                }
                for (key, result) in zip(batch, results) {
                    switch result {
                    case .success(.some(let stored)):
                        do throws(CloudSyncError) {
                            found[key] = .success(try decode(stored, key: key, from: provider))
                        } catch {
                            found[key] = .failure(error)
                        }
                    case .success(.none):
                        absentSomewhere.insert(key)
                    case .failure(let error):
                        report(error)
                        if firstError[key] == nil { firstError[key] = error }
                    }
                }
            }
            pending.removeAll { found[$0] != nil }
        }
        return keys.map { key in
            if let result = found[key] { return result }
            if absentSomewhere.contains(key) { return .success(nil) }
            return .failure(firstError[key] ?? CloudSyncError(.noProvider, "no provider could be asked", key: key))
        }
    }

    /// `ERR_NO_PROVIDER` naming each of `configured` with why it is unavailable, so whoever reads it knows what to
    /// fix.
    func noProviderError(_ configured: [any Provider], answers: [String: Availability]) -> CloudSyncError {
        guard !configured.isEmpty else {
            return CloudSyncError(.noProvider, "the store has no providers; configure or register one")
        }
        let reasons = configured.map { provider in
            "\(provider.id) (\(answers[provider.id]?.description ?? "not asked"))"
        }
        return CloudSyncError(
            .noProvider,
            "none of the configured providers is available: \(reasons.joined(separator: "; ")); "
                + "check that each is signed in and reachable")
    }

    static func unique(_ keys: [String]) -> [String] {
        var seen = Set<String>()
        return keys.filter { seen.insert($0).inserted }
    }
}
