extension CloudStore {
    /// Stores `value` under `key`: in failover mode on the first available provider it fits, in mirror mode on every
    /// one it fits.
    ///
    /// The value is encoded by the codec first and routed by its encoded size. A mirrored write succeeds when at
    /// least one provider stored it; the others are queued in the outbox when their failure may pass, or reported
    /// to ``StoreOptions/onError``.
    @discardableResult
    public func set(_ value: String, forKey key: String) async throws(CloudSyncError) -> WriteReceipt {
        try await write(.set, [KeyValue(key, value)])[0].get()
    }

    /// Stores every item, with one result per item, positionally.
    ///
    /// Keys going to one provider share its batch calls.
    public func multiSet(_ items: [KeyValue]) async throws(CloudSyncError) -> [Result<WriteReceipt, CloudSyncError>] {
        try await write(.set, items)
    }

    /// Removes `key`: in failover mode from the first available provider, in mirror mode from every one.
    @discardableResult
    public func remove(_ key: String) async throws(CloudSyncError) -> WriteReceipt {
        try await write(.remove, [KeyValue(key, "")])[0].get()
    }

    /// Removes every key; one result per key, positionally.
    public func multiRemove(_ keys: [String]) async throws(CloudSyncError) -> [Result<WriteReceipt, CloudSyncError>] {
        try await write(.remove, keys.map { KeyValue($0, "") })
    }

    // MARK: Planning and dispatch

    /// Where one item goes: providers by index into the available list, each with the value encoded for it.
    private struct Route {
        var destinations: [(provider: Int, encoded: String?)] = []
        var skippedTooLarge: [String] = []
    }

    /// One change bound for one provider.
    struct Delivery: Sendable {
        var item: Int
        var key: String
        var encoded: String?
    }

    private func write(_ operation: FailedWrite.Operation, _ items: [KeyValue]) async throws(CloudSyncError)
        -> [Result<WriteReceipt, CloudSyncError>]
    {
        let configured = try configuredProviders()
        // A write and an outbox flush of the same key never overlap, so a retry cannot land after this write.
        let lockedKeys = Set(items.map(\.key))
        await keyLocks.acquire(lockedKeys)
        defer { keyLocks.release(lockedKeys) }
        let (providers, answers) = await availableWithReasons(configured)
        var results = [Result<WriteReceipt, CloudSyncError>?](repeating: nil, count: items.count)
        var routes = [Route](repeating: Route(), count: items.count)
        var deliveries = [[Delivery]](repeating: [], count: providers.count)
        for (index, item) in items.enumerated() {
            do throws(CloudSyncError) {
                try validate(item.key, providers: configured)
                guard !providers.isEmpty else { throw noProviderError(configured, answers: answers) }
                routes[index] =
                    operation == .set
                    ? try route(item, among: providers, configured: configured)
                    : Route(
                        destinations: providers.indices.prefix(options.writeMode == .mirror ? providers.count : 1)
                            .map { ($0, nil) })
                for destination in routes[index].destinations {
                    deliveries[destination.provider].append(
                        Delivery(item: index, key: item.key, encoded: destination.encoded))
                }
            } catch {
                results[index] = .failure(error)
            }
        }

        let outcomes = await deliver(operation, deliveries, to: providers)
        for (index, item) in items.enumerated() where results[index] == nil {
            let encoded = Dictionary(
                routes[index].destinations.map { (providers[$0.provider].id, $0.encoded) },
                uniquingKeysWith: { a, _ in a })
            results[index] = settle(
                operation, key: item.key, encoded: encoded, outcomes: outcomes[index] ?? [],
                skipped: routes[index].skippedTooLarge)
        }
        return results.map { $0! }
    }

    /// Picks the providers a value goes to by its encoded size.
    private func route(_ item: KeyValue, among providers: [any Provider], configured: [any Provider])
        throws(CloudSyncError) -> Route
    {
        var route = Route()
        var tooSmall: [(id: String, cap: Int)] = []
        var largestSize = 0
        for (index, provider) in providers.enumerated() {
            let value = try encodedValue(item.value, key: item.key, for: provider)
            largestSize = max(largestSize, value.size)
            if !value.fits, let cap = value.cap {
                if options.tiering == .off {
                    throw value.tooLarge(
                        ", and tiering is off so it is not routed elsewhere; turn tiering on with a larger provider "
                            + "configured, or store a smaller value")
                }
                tooSmall.append((provider.id, cap))
                route.skippedTooLarge.append(provider.id)
                continue
            }
            route.destinations.append((index, value.encoded))
            if options.writeMode == .failover || options.tiering == .off { break }
        }
        guard route.destinations.isEmpty else {
            // In failover mode only the providers before the chosen one were passed over.
            return route
        }
        let availableIDs = Set(providers.map(\.id))
        let unavailableFitting = configured.filter { provider in
            !availableIDs.contains(provider.id) && (cap(of: provider).map { largestSize <= $0 } ?? true)
        }
        if !unavailableFitting.isEmpty {
            throw CloudSyncError(
                .noProvider,
                "the value is \(largestSize) bytes encoded; the providers large enough for it "
                    + "(\(unavailableFitting.map(\.id).joined(separator: ", "))) are unavailable",
                key: item.key)
        }
        let caps = tooSmall.map { "\($0.id) takes at most \($0.cap) bytes" }.joined(separator: ", ")
        throw CloudSyncError(
            .payloadTooLarge,
            "the value is \(largestSize) bytes encoded and fits no provider (\(caps)); add a provider without a size "
                + "cap (such as sqlite, directory, googleDrive or s3) after these, or raise the tiering thresholds",
            key: item.key)
    }

    /// Sends each provider its deliveries in batches of its batch limit, all providers at once.
    ///
    /// Returns, per item index, each provider's outcome.
    func deliver(_ operation: FailedWrite.Operation, _ deliveries: [[Delivery]], to providers: [any Provider]) async
        -> [Int: [(provider: String, result: Result<Void, CloudSyncError>)]]
    {
        await withTaskGroup(of: [(Int, String, Result<Void, CloudSyncError>)].self) { group in
            for (index, provider) in providers.enumerated() where !deliveries[index].isEmpty {
                let batch = deliveries[index]
                group.addTask { [self] in
                    let dispatcher = dispatcher(for: provider)
                    let results =
                        operation == .set
                        ? await dispatcher.set(batch.map { KeyValue($0.key, $0.encoded ?? "") })
                        : await dispatcher.remove(batch.map(\.key))
                    return zip(batch, results).map { delivery, result in (delivery.item, provider.id, result) }
                }
            }
            var byItem: [Int: [(provider: String, result: Result<Void, CloudSyncError>)]] = [:]
            for await outcomes in group {
                for (item, provider, result) in outcomes { byItem[item, default: []].append((provider, result)) }
            }
            return byItem
        }
    }

    /// Turns one item's per-provider outcomes into its result, queueing what may pass.
    private func settle(
        _ operation: FailedWrite.Operation, key: String, encoded: [String: String?],
        outcomes: [(provider: String, result: Result<Void, CloudSyncError>)], skipped: [String]
    ) -> Result<WriteReceipt, CloudSyncError> {
        let order = providerIDs
        let sorted = outcomes.sorted {
            (order.firstIndex(of: $0.provider) ?? 0) < (order.firstIndex(of: $1.provider) ?? 0)
        }
        var receipt = WriteReceipt(skippedTooLarge: skipped)
        var failures: [(provider: String, error: CloudSyncError)] = []
        for outcome in sorted {
            switch outcome.result {
            case .success:
                receipt.stored.append(outcome.provider)
                options.outbox?.superseded(key: key, provider: outcome.provider)
            case .failure(let error):
                failures.append((outcome.provider, error))
            }
        }
        let enqueue = { (failure: (provider: String, error: CloudSyncError)) -> Bool in
            guard failure.error.isRetryable, let outbox = self.options.outbox else { return false }
            return outbox.enqueue(
                FailedWrite(
                    key: key, operation: operation, encodedValue: encoded[failure.provider] ?? nil,
                    provider: failure.provider, error: failure.error),
                now: self.options.clock.nowMilliseconds())
        }
        if !receipt.stored.isEmpty {
            // A partial mirror write succeeds: the value is safe somewhere.
            for failure in failures {
                if enqueue(failure) { receipt.queued.append(failure.provider) } else { report(failure.error) }
            }
            return .success(receipt)
        }
        guard let first = failures.first else { return .success(receipt) }
        // Nothing stored: queue only when every failure may pass, otherwise the caller must act.
        if let blocking = failures.first(where: { !$0.error.isRetryable }) { return .failure(blocking.error) }
        for failure in failures {
            guard enqueue(failure) else { return .failure(first.error) }
            receipt.queued.append(failure.provider)
        }
        return .success(receipt)
    }
}
