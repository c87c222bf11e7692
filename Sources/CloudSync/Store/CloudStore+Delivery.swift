/// Delivering a batch's changes: to each provider in its own batches (several providers at once), each outcome settled
/// with the outbox in one storage transaction, retryable failures queued.
extension CloudStore {
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
        _ delivered: [(item: Int, outcomes: [(provider: String, result: Delivered)])],
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

    /// Sends each change to its provider, each provider its share in batches of its batch limit, all providers at
    /// once; the outcomes in the order of `changes`.
    ///
    /// A change for a (key, provider) pair in `holding` (an earlier write to it may still land) is not sent: its
    /// outcome is ``CloudStore/heldBehindEarlierWrite(key:provider:)``, which may pass, so it is queued.
    func deliver(
        _ operation: FailedWrite.Operation, _ changes: [Change], to targets: [Target], keys: [String],
        holding: Set<OutboxPair> = []
    ) async -> [Result<Void, CloudSyncError>] {
        if !holding.isEmpty {
            let held = changes.map { holding.contains(OutboxPair(key: keys[$0.item], provider: targets[$0.target].id)) }
            let sent = await deliver(operation, zip(changes, held).filter { !$1 }.map(\.0), to: targets, keys: keys)
            var outcomes = sent.makeIterator()
            return zip(changes, held).map { change, held in
                held
                    ? .failure(Self.heldBehindEarlierWrite(key: keys[change.item], provider: targets[change.target].id))
                    : outcomes.next()!
            }
        }
        guard let first = changes.first?.target else { return [] }
        if changes.allSatisfy({ $0.target == first }) {
            // One provider: its calls run in this task, with no child task to start and wait for, and its outcomes
            // are already in the order of the changes.
            let dispatcher = dispatcher(for: targets[first].provider)
            return operation == .set
                ? await dispatcher.set(changes.map { KeyValue(keys[$0.item], $0.encoded ?? "") })
                : await dispatcher.remove(changes.map { keys[$0.item] })
        }
        var deliveries = [[Delivery]](repeating: [], count: targets.count)
        for (position, change) in changes.enumerated() {
            // A delivery's item is the change's position here, where its outcome goes.
            deliveries[change.target].append(Delivery(item: position, key: keys[change.item], encoded: change.encoded))
        }
        let busy = targets.indices.filter { !deliveries[$0].isEmpty }
        var outcomes = [Result<Void, CloudSyncError>](repeating: .success(()), count: changes.count)
        let delivered = await withTaskGroup(of: ([Delivery], [Result<Void, CloudSyncError>]).self) { group in
            for index in busy {
                let (batch, provider) = (deliveries[index], targets[index].provider)
                group.addTask { [self] in (batch, await send(operation, batch, to: provider).map { $0.map { _ in () } })
                }
            }
            var delivered: [([Delivery], [Result<Void, CloudSyncError>])] = []
            for await answer in group { delivered.append(answer) }
            return delivered
        }
        for (batch, answers) in delivered {
            for (delivery, outcome) in zip(batch, answers) { outcomes[delivery.item] = outcome }
        }
        return outcomes
    }

    /// Sends each provider its deliveries in batches of its batch limit, all providers at once.
    ///
    /// Returns, per item index, each provider's outcome. A delivery for a (key, provider) pair in `holding` (an
    /// earlier write to it may still land) is not sent: its outcome is
    /// ``CloudStore/heldBehindEarlierWrite(key:provider:)``, which may pass.
    func deliver(
        _ operation: FailedWrite.Operation, _ deliveries: [[Delivery]], to providers: [any Provider],
        holding: Set<OutboxPair> = []
    ) async -> [Int: [(provider: String, result: Delivered)]] {
        if !holding.isEmpty {
            var sent = deliveries
            var held: [(item: Int, provider: String, key: String)] = []
            for (index, provider) in providers.enumerated() {
                sent[index] = deliveries[index].filter { delivery in
                    guard holding.contains(OutboxPair(key: delivery.key, provider: provider.id)) else { return true }
                    held.append((delivery.item, provider.id, delivery.key))
                    return false
                }
            }
            var byItem = await deliver(operation, sent, to: providers)
            for (item, provider, key) in held {
                byItem[item, default: []].append(
                    (provider, .failure(Self.heldBehindEarlierWrite(key: key, provider: provider))))
            }
            return byItem
        }
        let busy = providers.indices.filter { !deliveries[$0].isEmpty }
        if busy.count == 1, let only = busy.first {
            // One provider: its calls run in this task, with no child task to start and wait for.
            var byItem: [Int: [(provider: String, result: Delivered)]] = [:]
            byItem.reserveCapacity(deliveries[only].count)
            for (item, provider, result) in await deliver(operation, deliveries[only], to: providers[only]) {
                byItem[item, default: []].append((provider, result))
            }
            return byItem
        }
        return await withTaskGroup(of: [(Int, String, Delivered)].self) { group in
            for index in busy {
                let (batch, provider) = (deliveries[index], providers[index])
                group.addTask { [self] in await deliver(operation, batch, to: provider) }
            }
            var byItem: [Int: [(provider: String, result: Delivered)]] = [:]
            for await outcomes in group {
                for (item, provider, result) in outcomes { byItem[item, default: []].append((provider, result)) }
            }
            return byItem
        }
    }

    /// Sends one provider its deliveries in batches of its batch limit; each delivery's item, the provider and the
    /// outcome.
    func deliver(_ operation: FailedWrite.Operation, _ batch: [Delivery], to provider: any Provider) async
        -> [(Int, String, Delivered)]
    {
        let results = await send(operation, batch, to: provider)
        return zip(batch, results).map { delivery, result in (delivery.item, provider.id, result) }
    }

    /// A delivery's outcome: for a write, the version tag the provider gave the stored value where it told one.
    typealias Delivered = Result<String?, CloudSyncError>

    /// Sends one provider its deliveries in batches of its batch limit; one outcome per delivery, positionally.
    ///
    /// A write to a provider that tells the versions it stores and whose tags are not the values' digests (S3's
    /// ETags, CloudKit's change tags) answers them, so a snapshot can record the tag without listing the key again.
    func send(_ operation: FailedWrite.Operation, _ batch: [Delivery], to provider: any Provider) async
        -> [Delivered]
    {
        let dispatcher = dispatcher(for: provider)
        let capabilities = provider.capabilities
        let tellsVersions = capabilities.conditionalWrites && !capabilities.tagsAreValueDigests
        if batch.contains(where: { $0.condition != nil }) || (operation == .set && tellsVersions) {
            let conditions = batch.map(\.condition)
            return operation == .set
                ? await dispatcher.set(batch.map { KeyValue($0.key, $0.encoded ?? "") }, conditions: conditions)
                : await dispatcher.remove(batch.map(\.key), conditions: conditions).map { $0.map { nil } }
        }
        let outcomes =
            operation == .set
            ? await dispatcher.set(batch.map { KeyValue($0.key, $0.encoded ?? "") })
            : await dispatcher.remove(batch.map(\.key))
        return outcomes.map { $0.map { nil } }
    }

    /// Turns one item's outcomes on its primary providers into its result, queueing in `batch` what may pass and
    /// what waits for an unreachable provider; errors to report go to `unreported`.
    ///
    /// `outcomes` holds one outcome per change of `plan.primary`, positionally.
    func settle(
        _ operation: FailedWrite.Operation, item: Int, key: String, plan: WritePlan,
        outcomes: [Result<Void, CloudSyncError>], targets: [Target], batch: OutboxBatch,
        unreported: inout [CloudSyncError]
    ) -> Result<WriteReceipt, CloudSyncError> {
        let delivered = plan.primaryRange[item]
        let queued = plan.queuedRange[item]
        var receipt = WriteReceipt(
            skippedTooLarge: plan.skippedTooLarge.isEmpty ? [] : plan.skippedTooLarge[item] ?? [])
        if delivered.count == 1, queued.isEmpty, case .success = outcomes[delivered.lowerBound] {
            // The common case: stored on one provider, nothing to queue.
            let target = targets[plan.primary[delivered.lowerBound].target]
            receipt.stored = target.alone
            batch.superseded(key: key, provider: target.id)
            return .success(receipt)
        }
        // Each in preference order, as the plan lists them.
        var failures: [(change: Change, error: CloudSyncError)] = []
        for position in delivered {
            let change = plan.primary[position]
            switch outcomes[position] {
            case .success:
                receipt.stored.append(targets[change.target].id)
                batch.superseded(key: key, provider: targets[change.target].id)
            case .failure(let error):
                failures.append((change, error))
            }
        }
        guard !failures.isEmpty || !queued.isEmpty else { return .success(receipt) }
        let unreachable = plan.queued[queued].map { change in
            (
                change: change,
                error: CloudSyncError(.offline, "the provider was unavailable", provider: targets[change.target].id)
            )
        }
        return settleFailures(
            operation, key: key, receipt: receipt, failures: failures + unreachable, targets: targets, batch: batch,
            unreported: &unreported)
    }

    /// The result of an item some of whose changes failed (or wait for an unreachable provider), given what its
    /// receipt says was stored, queueing in `batch` what may pass; errors to report go to `unreported`.
    ///
    /// Stored somewhere, the write succeeds and every failure that may pass is queued. Stored nowhere, it is queued
    /// only when every failure may pass, and otherwise fails having queued nothing.
    func settleFailures(
        _ operation: FailedWrite.Operation, key: String, receipt: WriteReceipt,
        failures: [(change: Change, error: CloudSyncError)], targets: [Target], batch: OutboxBatch,
        unreported: inout [CloudSyncError]
    ) -> Result<WriteReceipt, CloudSyncError> {
        var receipt = receipt
        let enqueue = { (failure: (change: Change, error: CloudSyncError)) -> Bool in
            failure.error.isRetryable
                && batch.enqueue(
                    FailedWrite(
                        key: key, operation: operation, encodedValue: failure.change.encoded,
                        provider: targets[failure.change.target].id, error: failure.error))
        }
        if !receipt.stored.isEmpty {
            // A partial mirror write succeeds: the value is safe somewhere.
            for failure in failures {
                if enqueue(failure) {
                    receipt.queued.append(targets[failure.change.target].id)
                } else {
                    unreported.append(failure.error)
                }
            }
            return .success(receipt)
        }
        // Nothing stored: queue only when every failure may pass, otherwise the caller must act.
        if let blocking = failures.first(where: { !$0.error.isRetryable }) { return .failure(blocking.error) }
        guard let first = failures.first else { return .success(receipt) }
        for failure in failures {
            guard enqueue(failure) else {
                // The write fails as a whole: what this call queued before goes again, so nothing of it lands later.
                for queued in receipt.queued { batch.superseded(key: key, provider: queued) }
                return .failure(first.error)
            }
            receipt.queued.append(targets[failure.change.target].id)
        }
        return .success(receipt)
    }
}
