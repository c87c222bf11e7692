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

    /// What one item asks of each configured provider.
    ///
    /// The item's own change (`primary`: its set, or its remove) goes to the available providers it is meant for and
    /// waits in the outbox for those it is meant for that cannot be reached; every other provider gets a `cleanup`
    /// remove (delivered only once the change is acknowledged), so that no older copy of the key is left anywhere
    /// for a read to find: not on a provider a larger value was routed past, not on a later provider a failover
    /// write did not choose, not on a provider that was offline.
    private struct Plan {
        /// The item's change for available providers: provider id and the value encoded for it (nil for a remove).
        var primary: [(provider: String, encoded: String?)] = []
        /// The item's change for providers that cannot be reached now, to queue.
        var primaryQueued: [(provider: String, encoded: String?)] = []
        /// Removes of an older copy, on available providers.
        var cleanup: [String] = []
        /// Removes of an older copy, to queue for providers that cannot be reached now.
        var cleanupQueued: [String] = []
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
        // A write and an outbox flush (or a read repair) of the same key never overlap, so neither can land after
        // this write.
        let lockedKeys = Set(items.map(\.key))
        await lockForWriting(lockedKeys)
        defer { keyLocks.release(lockedKeys) }
        // Work begun under one account is never queued under the next.
        let generation = options.outbox?.generation
        let (available, answers) = await availableWithReasons(configured)
        let availableIDs = Set(available.map(\.id))
        // Providers that may hold the key but cannot be reached now; a platform without the provider holds nothing.
        let waiting =
            options.outbox == nil
            ? []
            : configured.filter { !availableIDs.contains($0.id) && answers[$0.id]?.reason != .unsupportedPlatform }
        let waitingIDs = Set(waiting.map(\.id))
        var results = [Result<WriteReceipt, CloudSyncError>?](repeating: nil, count: items.count)
        var plans = [Plan](repeating: Plan(), count: items.count)
        for (index, item) in items.enumerated() {
            do throws(CloudSyncError) {
                try validate(item.key, providers: configured)
                guard !available.isEmpty || !waiting.isEmpty else {
                    throw noProviderError(configured, answers: answers)
                }
                plans[index] =
                    operation == .set
                    ? try planSet(
                        item, available: available, waiting: waiting, configured: configured,
                        availableIDs: availableIDs, waitingIDs: waitingIDs)
                    : Plan(
                        primary: available.map { ($0.id, nil) }, primaryQueued: waiting.map { ($0.id, nil) })
            } catch {
                results[index] = .failure(error)
            }
        }

        let primary = await deliver(
            operation, items.indices.map { index in plans[index].primary.map { (index, $0.provider, $0.encoded) } },
            to: available, keys: items.map(\.key))
        // What the outcomes leave to queue is queued for all items at once, one storage transaction; the errors to
        // report wait until it is done.
        let order = Dictionary(configured.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        let (settled, unreported) = withOutboxBatch(generation: generation) { batch in
            var settled = results
            var unreported: [CloudSyncError] = []
            for (index, item) in items.enumerated() where settled[index] == nil {
                let result = settle(
                    operation, key: item.key, plan: plans[index], outcomes: primary[index] ?? [], order: order,
                    batch: batch, unreported: &unreported)
                settled[index] = result
                // The older copies go only once the change itself is safe somewhere.
                if case .success = result {
                    for provider in plans[index].cleanupQueued {
                        _ = batch.enqueue(
                            FailedWrite(
                                key: item.key, operation: .remove, encodedValue: nil, provider: provider,
                                error: CloudSyncError(.offline, "the provider was unavailable", provider: provider)))
                    }
                }
            }
            return (settled, unreported)
        }
        results = settled
        for error in unreported { report(error) }
        var cleanups: [[(Int, String, String?)]] = []
        for index in items.indices where plans[index].cleanup.count > 0 {
            if case .success = results[index] { cleanups.append(plans[index].cleanup.map { (index, $0, nil) }) }
        }
        let cleaned = await deliver(.remove, cleanups, to: available, keys: items.map(\.key))
        guard !cleaned.isEmpty else { return results.map { $0! } }
        let failedCleanups = withOutboxBatch(generation: generation) { batch in
            var unreported: [CloudSyncError] = []
            for (index, outcomes) in cleaned.sorted(by: { $0.key < $1.key }) {
                for outcome in outcomes {
                    switch outcome.result {
                    case .success: batch.superseded(key: items[index].key, provider: outcome.provider)
                    case .failure(let error):
                        if !error.isRetryable
                            || !batch.enqueue(
                                FailedWrite(
                                    key: items[index].key, operation: .remove, encodedValue: nil,
                                    provider: outcome.provider, error: error))
                        {
                            unreported.append(error)
                        }
                    }
                }
            }
            return unreported
        }
        for error in failedCleanups { report(error) }
        return results.map { $0! }
    }

    /// Picks the providers a value goes to by its encoded size, and the ones whose older copy must go.
    ///
    /// `availableIDs` and `waitingIDs` are the ids of `available` and `waiting`, made once per call, not per item.
    private func planSet(
        _ item: KeyValue, available: [any Provider], waiting: [any Provider], configured: [any Provider],
        availableIDs: Set<String>, waitingIDs: Set<String>
    ) throws(CloudSyncError) -> Plan {
        var encoded: [String: EncodedValue] = [:]
        var tooSmall: [(id: String, cap: Int)] = []
        var largestSize = 0
        for provider in available + waiting {
            let value = try encodedValue(item.value, key: item.key, for: provider)
            encoded[provider.id] = value
            largestSize = max(largestSize, value.size)
        }
        // Where the value goes: every provider it fits (mirror), or the first available one it fits, else the first
        // unreachable one it fits, to wait in the outbox (failover). With tiering off, the preferred provider only.
        var chosen: [String] = []
        if options.tiering == .off {
            let preferred = available.first ?? waiting.first!
            let value = encoded[preferred.id]!
            guard value.fits else {
                throw value.tooLarge(
                    ", and tiering is off so it is not routed elsewhere; turn tiering on with a larger provider "
                        + "configured, or store a smaller value")
            }
            chosen = [preferred.id]
        } else if options.writeMode == .mirror {
            chosen = configured.map(\.id).filter { encoded[$0]?.fits == true }
        } else if let first = available.first(where: { encoded[$0.id]!.fits })
            ?? waiting.first(where: {
                encoded[$0.id]!.fits
            })
        {
            chosen = [first.id]
        }
        for provider in configured {
            if let value = encoded[provider.id], !value.fits, let cap = value.cap {
                tooSmall.append((provider.id, cap))
            }
        }
        guard !chosen.isEmpty else {
            let caps = tooSmall.map { "\($0.id) takes at most \($0.cap) bytes" }.joined(separator: ", ")
            let unreachable = configured.filter { provider in
                !availableIDs.contains(provider.id) && !waitingIDs.contains(provider.id)
                    && (cap(of: provider).map { largestSize <= $0 } ?? true)
            }
            if !unreachable.isEmpty {
                throw CloudSyncError(
                    .noProvider,
                    "the value is \(largestSize) bytes encoded; the providers large enough for it "
                        + "(\(unreachable.map(\.id).joined(separator: ", "))) are unavailable",
                    key: item.key)
            }
            throw CloudSyncError(
                .payloadTooLarge,
                "the value is \(largestSize) bytes encoded and fits no provider (\(caps)); add a provider without a "
                    + "size cap (such as sqlite, directory, googleDrive or s3) after these, or raise the tiering "
                    + "thresholds",
                key: item.key)
        }
        var plan = Plan()
        // Passed over for size: the ones before the chosen provider in failover, every one too small in mirror.
        let firstChosen = configured.firstIndex { $0.id == chosen[0] } ?? 0
        plan.skippedTooLarge = tooSmall.map(\.id).filter { id in
            options.writeMode == .mirror || (configured.firstIndex { $0.id == id } ?? 0) < firstChosen
        }
        for provider in configured where availableIDs.contains(provider.id) || waitingIDs.contains(provider.id) {
            let reachable = availableIDs.contains(provider.id)
            if chosen.contains(provider.id) {
                let change = (provider.id, Optional(encoded[provider.id]!.encoded))
                if reachable { plan.primary.append(change) } else { plan.primaryQueued.append(change) }
            } else if reachable {
                plan.cleanup.append(provider.id)
            } else {
                plan.cleanupQueued.append(provider.id)
            }
        }
        return plan
    }

    /// Runs `body` with a batch of the outbox's (see `Outbox.batch`), or, without an outbox, with one that queues
    /// nothing; `body` must have no effect besides the batch's (it may run twice).
    func withOutboxBatch<T: Sendable>(generation: Int?, _ body: (OutboxBatch) -> T) -> T {
        guard let outbox = options.outbox else { return body(OutboxBatch.none) }
        return outbox.batch(now: options.clock.nowMilliseconds(), generation: generation, body)
    }

    /// Settles delivered changes with the outbox in one batch, so in one storage transaction.
    ///
    /// A change that reached its provider drops the entry it supersedes, and a retryable failure is queued. Returns,
    /// for each outcome of each item in order, whether it was queued.
    ///
    /// - Parameters:
    ///   - delivered: each item's outcomes, one per provider it was sent to.
    ///   - key: the key of an item.
    ///   - encoded: the encoded value an item was sending to a provider (nil for removes).
    func queueRetryableFailures(
        _ operation: FailedWrite.Operation,
        _ delivered: [(item: Int, outcomes: [(provider: String, result: Result<Void, CloudSyncError>)])],
        generation: Int?, key: (Int) -> String, encoded: (Int, String) -> String? = { _, _ in nil }
    ) -> [[Bool]] {
        withOutboxBatch(generation: generation) { batch in
            delivered.map { item, outcomes in
                outcomes.map { outcome in
                    switch outcome.result {
                    case .success:
                        batch.superseded(key: key(item), provider: outcome.provider)
                        return false
                    case .failure(let error):
                        return error.isRetryable
                            && batch.enqueue(
                                FailedWrite(
                                    key: key(item), operation: operation,
                                    encodedValue: encoded(item, outcome.provider), provider: outcome.provider,
                                    error: error))
                    }
                }
            }
        }
    }

    /// Sends each item's changes (item index, provider id, encoded value) to the available providers, each provider
    /// its share in batches of its batch limit, all providers at once.
    ///
    /// Returns, per item index, each provider's outcome.
    private func deliver(
        _ operation: FailedWrite.Operation, _ changes: [[(Int, String, String?)]], to providers: [any Provider],
        keys: [String]
    ) async -> [Int: [(provider: String, result: Result<Void, CloudSyncError>)]] {
        let index = Dictionary(uniqueKeysWithValues: providers.enumerated().map { ($1.id, $0) })
        var deliveries = [[Delivery]](repeating: [], count: providers.count)
        for change in changes.joined() {
            guard let provider = index[change.1] else { continue }
            deliveries[provider].append(Delivery(item: change.0, key: keys[change.0], encoded: change.2))
        }
        return await deliver(operation, deliveries, to: providers)
    }

    /// Sends each provider its deliveries in batches of its batch limit, all providers at once.
    ///
    /// Returns, per item index, each provider's outcome.
    func deliver(_ operation: FailedWrite.Operation, _ deliveries: [[Delivery]], to providers: [any Provider]) async
        -> [Int: [(provider: String, result: Result<Void, CloudSyncError>)]]
    {
        let busy = providers.indices.filter { !deliveries[$0].isEmpty }
        if busy.count == 1, let only = busy.first {
            // One provider: its calls run in this task, with no child task to start and wait for.
            var byItem: [Int: [(provider: String, result: Result<Void, CloudSyncError>)]] = [:]
            byItem.reserveCapacity(deliveries[only].count)
            for (item, provider, result) in await deliver(operation, deliveries[only], to: providers[only]) {
                byItem[item, default: []].append((provider, result))
            }
            return byItem
        }
        return await withTaskGroup(of: [(Int, String, Result<Void, CloudSyncError>)].self) { group in
            for index in busy {
                let (batch, provider) = (deliveries[index], providers[index])
                group.addTask { [self] in await deliver(operation, batch, to: provider) }
            }
            var byItem: [Int: [(provider: String, result: Result<Void, CloudSyncError>)]] = [:]
            for await outcomes in group {
                for (item, provider, result) in outcomes { byItem[item, default: []].append((provider, result)) }
            }
            return byItem
        }
    }

    /// Sends one provider its deliveries in batches of its batch limit; each delivery's item, the provider and the
    /// outcome.
    private func deliver(_ operation: FailedWrite.Operation, _ batch: [Delivery], to provider: any Provider) async
        -> [(Int, String, Result<Void, CloudSyncError>)]
    {
        let dispatcher = dispatcher(for: provider)
        let results =
            operation == .set
            ? await dispatcher.set(batch.map { KeyValue($0.key, $0.encoded ?? "") })
            : await dispatcher.remove(batch.map(\.key))
        return zip(batch, results).map { delivery, result in (delivery.item, provider.id, result) }
    }

    /// Turns one item's outcomes on its primary providers into its result, queueing in `batch` what may pass and
    /// what waits for an unreachable provider; errors to report go to `unreported`.
    private func settle(
        _ operation: FailedWrite.Operation, key: String, plan: Plan,
        outcomes: [(provider: String, result: Result<Void, CloudSyncError>)], order: [String: Int],
        batch: OutboxBatch, unreported: inout [CloudSyncError]
    ) -> Result<WriteReceipt, CloudSyncError> {
        let sorted =
            outcomes.count < 2 ? outcomes : outcomes.sorted { (order[$0.provider] ?? 0) < (order[$1.provider] ?? 0) }
        var receipt = WriteReceipt(skippedTooLarge: plan.skippedTooLarge)
        var failures: [(provider: String, error: CloudSyncError)] = []
        for outcome in sorted {
            switch outcome.result {
            case .success:
                receipt.stored.append(outcome.provider)
                batch.superseded(key: key, provider: outcome.provider)
            case .failure(let error):
                failures.append((outcome.provider, error))
            }
        }
        let unreachable = plan.primaryQueued.map {
            (
                provider: $0.provider,
                error: CloudSyncError(.offline, "the provider was unavailable", provider: $0.provider)
            )
        }
        guard !failures.isEmpty || !unreachable.isEmpty else { return .success(receipt) }
        let encoded = Dictionary(
            (plan.primary + plan.primaryQueued).map { ($0.provider, $0.encoded) }, uniquingKeysWith: { a, _ in a })
        let enqueue = { (failure: (provider: String, error: CloudSyncError)) -> Bool in
            failure.error.isRetryable
                && batch.enqueue(
                    FailedWrite(
                        key: key, operation: operation, encodedValue: encoded[failure.provider] ?? nil,
                        provider: failure.provider, error: failure.error))
        }
        if !receipt.stored.isEmpty {
            // A partial mirror write succeeds: the value is safe somewhere.
            for failure in failures + unreachable {
                if enqueue(failure) {
                    receipt.queued.append(failure.provider)
                } else {
                    unreported.append(failure.error)
                }
            }
            return .success(receipt)
        }
        // Nothing stored: queue only when every failure may pass, otherwise the caller must act.
        if let blocking = failures.first(where: { !$0.error.isRetryable }) { return .failure(blocking.error) }
        guard let first = (failures + unreachable).first else { return .success(receipt) }
        for failure in failures + unreachable {
            guard enqueue(failure) else {
                // The write fails as a whole: what this call queued before goes again, so nothing of it lands later.
                for queued in receipt.queued { batch.superseded(key: key, provider: queued) }
                return .failure(first.error)
            }
            receipt.queued.append(failure.provider)
        }
        return .success(receipt)
    }
}
