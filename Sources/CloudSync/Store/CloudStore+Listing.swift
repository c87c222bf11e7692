extension CloudStore {
    /// Keys per listing page the store asks for.
    static let listingPageSize = 1000

    /// Every key of every available provider, each once and sorted, with the providers that could not be listed.
    ///
    /// Changes still queued in the outbox count as landed, as reads count them: a key removed while a provider was
    /// away is not listed for it, and one written while it was away is.
    ///
    /// The providers are listed concurrently, so a slow one costs its own time, not the sum.
    ///
    /// A provider that cannot list, or fails to, does not hide the others; it is named in
    /// ``KeyListing/unlisted`` and reported to ``StoreOptions/onError``.
    public func allKeys() async throws(CloudSyncError) -> KeyListing {
        let configured = try configuredProviders()
        let (providers, answers) = await availableWithReasons(configured)
        guard !providers.isEmpty else { throw noProviderError(configured, answers: answers) }
        // Every provider is listed at once: a slow one holds up only its own part.
        let listings = await withTaskGroup(of: (String, Result<Set<StoreKey>, CloudSyncError>).self) { group in
            for provider in providers {
                // The child returns what a helper answers: a `do throws(CloudSyncError)` inside the child closure
                // was miscompiled in release builds (the quota job trapped on an index out of range).
                group.addTask { [self] in (provider.id, await listing(of: provider)) }
            }
            var listings: [String: Result<Set<StoreKey>, CloudSyncError>] = [:]
            for await (id, listing) in group { listings[id] = listing }
            return listings
        }
        // What a provider will hold once its queued changes land, as reads see it: a key whose removal waits for a
        // provider is not listed for it, and one whose write waits is.
        var queued: [String: (sets: [StoreKey], removes: Set<StoreKey>)] = [:]
        for entry in options.outbox?.pending ?? [] {
            if entry.operation == .set {
                queued[entry.provider, default: ([], [])].sets.append(StoreKey(entry.key))
            } else {
                queued[entry.provider, default: ([], [])].removes.insert(StoreKey(entry.key))
            }
        }
        var keys = Set<StoreKey>()
        var unlisted: [String: CloudSyncError] = [:]
        for provider in providers {
            switch listings[provider.id] {
            case .success(var listed):
                if let changes = queued[provider.id] {
                    listed.subtract(changes.removes)
                    listed.formUnion(changes.sets)
                }
                keys.formUnion(listed)
            case .failure(let error):
                report(error)
                unlisted[provider.id] = error
            case nil: break
            }
        }
        return KeyListing(keys: keys.sorted().map(\.string), unlisted: unlisted)
    }

    /// Every key of one provider, page by page, each page under the deadline.
    ///
    /// Whatever the provider answers, the listing ends: a cursor it returned before (a cycle, which a damaged file or
    /// a buggy service can produce) or a page longer than asked for fails with `ERR_PROVIDER` rather than looping or
    /// growing without bound.
    func forEachPage(of provider: any Provider, _ body: ([String]) async throws(CloudSyncError) -> Void)
        async throws(CloudSyncError)
    {
        guard provider.capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: provider.id)
        }
        var cursor: String?
        var seen = Set<String>()
        repeat {
            let after = cursor
            let page = try await dispatcher(for: provider).call {
                try await $0.listKeys(after: after, limit: Self.listingPageSize)
            }
            guard page.keys.count <= Self.listingPageSize else {
                throw CloudSyncError(
                    .provider,
                    "listing returned \(page.keys.count) keys for a page of at most \(Self.listingPageSize); the "
                        + "provider's storage may be damaged or changing under the read",
                    provider: provider.id)
            }
            try await body(page.keys)
            if let next = page.nextCursor, !seen.insert(next).inserted {
                throw CloudSyncError(
                    .provider,
                    "listing returned a cursor it had returned before, so it would never end; the provider's storage "
                        + "may be damaged or changing under the read",
                    provider: provider.id)
            }
            cursor = page.nextCursor
        } while cursor != nil
    }

    /// Every key and its value, decoded, read in batches.
    ///
    /// Keyed by ``StoreKey``: two canonically equivalent spellings of a key are two items, as they are two keys.
    public func allItems() async throws(CloudSyncError) -> [StoreKey: String] {
        let keys = try await allKeys().keys
        var items: [StoreKey: String] = [:]
        for chunk in keys.chunked(Self.listingPageSize) {
            let batch = Array(chunk)
            for (key, value) in zip(batch, try await multiGet(batch)) {
                if let value { items[StoreKey(key)] = value }
            }
        }
        return items
    }

    /// Removes every key that any available provider lists from every available provider, whatever the write mode.
    ///
    /// Keys are enumerated from the providers, deliberately: a "delete my data" flow built on a fixed key list
    /// forgets a key one day. Each provider is listed page by page and each page removed before the next is asked
    /// for, so memory holds one page however many keys there are (listings continue after the last key seen, so
    /// removals behind the cursor do not disturb them). Keys held only by a provider that cannot list stay;
    /// ``ClearResult/unlisted`` names such providers.
    ///
    /// Each page of keys is removed as ``multiRemove(_:)`` removes: under the keys' locks, superseding what the
    /// outbox holds for them, and queueing the removes of providers that cannot be reached now, so no write queued
    /// before the clear brings a key back.
    public func clear() async throws(CloudSyncError) -> ClearResult {
        let configured = try configuredProviders()
        let (providers, answers) = await availableWithReasons(configured)
        guard !providers.isEmpty else { throw noProviderError(configured, answers: answers) }
        var result = ClearResult(removed: 0, failed: [], unlisted: [:])
        func removeEverywhere(_ keys: [String]) async throws(CloudSyncError) {
            for (key, outcome) in zip(keys, try await multiRemove(keys)) {
                switch outcome {
                case .success(let receipt) where receipt.stored.isEmpty: result.queued += 1
                case .success: result.removed += 1
                case .failure(let error): result.failed.append(KeyFailure(key: key, error: error))
                }
            }
        }
        for provider in providers {
            do throws(CloudSyncError) {
                // A key removed while an earlier provider was listed is gone from this one too, so it is not
                // counted twice.
                try await forEachPage(of: provider) { page throws(CloudSyncError) in
                    try await removeEverywhere(page)
                }
            } catch {
                report(error)
                result.unlisted[provider.id] = error
            }
        }
        // A key written while its providers were away lives only in the outbox so far: it is cleared too, or its
        // queued write would bring it back. The removes above superseded the queued writes of every listed key.
        let queuedOnly = (options.outbox?.pending ?? []).filter { $0.operation == .set }.map(\.key).keySet().sorted()
            .map(\.string)
        for chunk in queuedOnly.chunked(Self.listingPageSize) { try await removeEverywhere(Array(chunk)) }
        return result
    }

    /// Space used and available on every available provider that can know; providers that cannot are left out
    /// rather than guessed.
    public func quota() async throws(CloudSyncError) -> [QuotaEntry] {
        let providers = await available(try configuredProviders() + attachedProviders()).filter(
            \.capabilities.reportsQuota)
        // Every provider is asked at once; the entries keep the providers' order.
        let answers = await withTaskGroup(of: (Int, Result<ProviderQuota?, CloudSyncError>).self) { group in
            for (index, provider) in providers.enumerated() {
                group.addTask { [self] in (index, await quotaAnswer(of: provider)) }
            }
            var answers = [Result<ProviderQuota?, CloudSyncError>](repeating: .success(nil), count: providers.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers
        }
        var entries: [QuotaEntry] = []
        for (provider, answer) in zip(providers, answers) {
            switch answer {
            case .success(let quota?):
                entries.append(
                    QuotaEntry(provider: provider.id, usedBytes: quota.usedBytes, totalBytes: quota.totalBytes))
            case .success(nil): continue
            case .failure(let error):
                report(error)
                entries.append(QuotaEntry(provider: provider.id, error: error))
            }
        }
        return entries
    }

    /// Every key one provider lists, or the error that stopped its listing.
    private func listing(of provider: any Provider) async -> Result<Set<StoreKey>, CloudSyncError> {
        var keys = Set<StoreKey>()
        do throws(CloudSyncError) {
            try await forEachPage(of: provider) { page in keys.formUnion(page.lazy.map { StoreKey($0) }) }
            return .success(keys)
        } catch {
            return .failure(error)
        }
    }

    /// One provider's quota, or the error it answered.
    private func quotaAnswer(of provider: any Provider) async -> Result<ProviderQuota?, CloudSyncError> {
        do throws(CloudSyncError) {
            return .success(try await dispatcher(for: provider).call { try await $0.quota() })
        } catch {
            return .failure(error)
        }
    }
}
