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

    /// What a write needs to know of one configured provider, worked out once per call rather than once per item
    /// (a class, so looking one up copies a reference, not its fields).
    private final class Target {
        let provider: any Provider
        let id: String
        /// The codec its values are encoded with; nil stores them as given.
        let codec: (any ValueCodec)?
        /// The largest encoded value it takes (``CloudStore/cap(of:)``); nil for no cap.
        let cap: Int?
        /// Available now: it gets the item's change, or the removal of an older copy, directly.
        let reachable: Bool
        /// Unavailable but may hold the key: what it should get waits in the outbox.
        let waiting: Bool
        /// `[id]`, shared by every receipt stored on this provider alone, so those receipts allocate nothing.
        let alone: [String]

        init(provider: any Provider, codec: (any ValueCodec)?, cap: Int?, reachable: Bool, waiting: Bool) {
            self.provider = provider
            self.id = provider.id
            self.codec = codec
            self.cap = cap
            self.reachable = reachable
            self.waiting = waiting
            self.alone = [provider.id]
        }
    }

    /// One change of one item for one provider (by its index among the targets); the encoded value is nil for a
    /// remove.
    private struct Change {
        var item: Int
        var target: Int
        var encoded: String?
    }

    /// What the items ask of each configured provider.
    ///
    /// Each item's change (`primary`: its set, or its remove) goes to the available providers it is meant for and
    /// waits in the outbox (`queued`) for those it is meant for that cannot be reached; each provider a read falls
    /// through before reaching the new value gets a `cleanup` remove (delivered only once the change is
    /// acknowledged; `cleanupQueued` for unreachable ones), so no older copy is found first: not on a provider a
    /// larger value was routed past, not on an earlier provider that was offline, in mirror mode not on one the value
    /// does not fit. A failover write leaves the providers after the one it lands on alone.
    ///
    /// The changes of all items sit in flat lists, each item's together in preference order, found through the
    /// item's range: a batch of a thousand items makes a few arrays, not several per item.
    private struct WritePlan {
        var primary: [Change] = []
        var queued: [Change] = []
        var cleanup: [Change] = []
        var cleanupQueued: [Change] = []
        var primaryRange: [Range<Int>]
        var queuedRange: [Range<Int>]
        var cleanupRange: [Range<Int>]
        var cleanupQueuedRange: [Range<Int>]
        /// Providers passed over for size, by item; only items with some.
        var skippedTooLarge: [Int: [String]] = [:]

        init(items: Int) {
            primary.reserveCapacity(items)
            primaryRange = Array(repeating: 0..<0, count: items)
            queuedRange = primaryRange
            cleanupRange = primaryRange
            cleanupQueuedRange = primaryRange
        }

        /// Records, as `item`'s, the changes added since the counts `starts` were taken.
        mutating func close(_ item: Int, from starts: (Int, Int, Int, Int)) {
            primaryRange[item] = starts.0..<primary.count
            queuedRange[item] = starts.1..<queued.count
            cleanupRange[item] = starts.2..<cleanup.count
            cleanupQueuedRange[item] = starts.3..<cleanupQueued.count
        }

        var counts: (Int, Int, Int, Int) { (primary.count, queued.count, cleanup.count, cleanupQueued.count) }
    }

    /// One change bound for one provider.
    struct Delivery: Sendable {
        var item: Int
        var key: String
        var encoded: String?
        /// What the provider must find when the change arrives; nil for an unconditional change.
        var condition: WriteCondition? = nil
    }

    private func write(_ operation: FailedWrite.Operation, _ items: [KeyValue]) async throws(CloudSyncError)
        -> [Result<WriteReceipt, CloudSyncError>]
    {
        let configured = try configuredProviders()
        let keys = items.map(\.key)
        // A write and an outbox flush (or a read repair) of the same key never overlap, so neither can land after
        // this write.
        let lockedKeys = keys.keySet()
        return try await withWriteLock(lockedKeys) {
            inFlight async throws(CloudSyncError) -> [Result<WriteReceipt, CloudSyncError>] in
            // Work begun under one account is never queued under the next.
            let generation = options.outbox?.generation
            let (available, answers) = await availableWithReasons(configured)
            let availableIDs = Set(available.map(\.id))
            let targets = configured.map { provider in
                let reachable = availableIDs.contains(provider.id)
                return Target(
                    provider: provider, codec: codec(for: provider), cap: cap(of: provider), reachable: reachable,
                    // A platform without the provider holds nothing.
                    waiting: !reachable && options.outbox != nil && answers[provider.id]?.reason != .unsupportedPlatform
                )
            }
            let reachable = targets.indices.filter { targets[$0].reachable }
            let waiting = targets.indices.filter { targets[$0].waiting }
            let rules = keyRules(of: configured)
            var results = [Result<WriteReceipt, CloudSyncError>?](repeating: nil, count: items.count)
            var plan = WritePlan(items: items.count)
            var encoded = [EncodedValue?](repeating: nil, count: targets.count)
            for (index, item) in items.enumerated() {
                let starts = plan.counts
                do throws(CloudSyncError) {
                    try validate(item.key, rules: rules)
                    guard !reachable.isEmpty || !waiting.isEmpty else {
                        throw noProviderError(configured, answers: answers)
                    }
                    if operation == .set {
                        try planSet(
                            index, item, targets: targets, reachable: reachable, waiting: waiting, encoded: &encoded,
                            into: &plan)
                    } else {
                        for target in reachable { plan.primary.append(Change(item: index, target: target)) }
                        for target in waiting { plan.queued.append(Change(item: index, target: target)) }
                    }
                } catch {
                    results[index] = .failure(error)
                }
                plan.close(index, from: starts)
            }

            let outcomes = await deliver(operation, plan.primary, to: targets, keys: keys, holding: inFlight)
            // What the outcomes leave to queue is queued for all items at once, one storage transaction; the errors to
            // report wait until it is done.
            let (settled, unreported) = withOutboxBatch(generation: generation) { batch in
                var settled = results
                var unreported: [CloudSyncError] = []
                for index in items.indices where settled[index] == nil {
                    let result = settle(
                        operation, item: index, key: keys[index], plan: plan, outcomes: outcomes, targets: targets,
                        batch: batch, unreported: &unreported)
                    settled[index] = result
                    // The older copies go only once the change itself is safe somewhere.
                    if case .success = result {
                        for change in plan.cleanupQueued[plan.cleanupQueuedRange[index]] {
                            let provider = targets[change.target].id
                            _ = batch.enqueue(
                                FailedWrite(
                                    key: keys[index], operation: .remove, encodedValue: nil, provider: provider,
                                    error: CloudSyncError(.offline, "the provider was unavailable", provider: provider))
                            )
                        }
                    }
                }
                return (settled, unreported)
            }
            results = settled
            for error in unreported { report(error) }
            var cleanups: [Change] = []
            for index in items.indices where !plan.cleanupRange[index].isEmpty {
                if case .success = results[index] { cleanups += plan.cleanup[plan.cleanupRange[index]] }
            }
            guard !cleanups.isEmpty else { return results.map { $0! } }
            let cleaned = await deliver(.remove, cleanups, to: targets, keys: keys, holding: inFlight)
            let failedCleanups = withOutboxBatch(generation: generation) { batch in
                var unreported: [CloudSyncError] = []
                for (change, outcome) in zip(cleanups, cleaned) {
                    let (key, provider) = (keys[change.item], targets[change.target].id)
                    switch outcome {
                    case .success: batch.superseded(key: key, provider: provider)
                    case .failure(let error):
                        if !error.isRetryable
                            || !batch.enqueue(
                                FailedWrite(
                                    key: key, operation: .remove, encodedValue: nil, provider: provider, error: error))
                        {
                            unreported.append(error)
                        }
                    }
                }
                return unreported
            }
            for error in failedCleanups { report(error) }
            return results.map { $0! }
        }
    }

    /// Picks the providers a value goes to by its encoded size, and the ones whose older copy must go, and adds
    /// them to `plan`; a throw adds nothing.
    ///
    /// `reachable` and `waiting` are the indices of the available and of the waiting targets; `encoded` is room for
    /// one encoded value per target, reused from item to item.
    private func planSet(
        _ index: Int, _ item: KeyValue, targets: [Target], reachable: [Int], waiting: [Int],
        encoded: inout [EncodedValue?], into plan: inout WritePlan
    ) throws(CloudSyncError) {
        for target in encoded.indices { encoded[target] = nil }
        var largestSize = 0
        var someTooLarge = false
        for position in 0..<(reachable.count + waiting.count) {
            let index = position < reachable.count ? reachable[position] : waiting[position - reachable.count]
            let target = targets[index]
            let value = EncodedValue(
                encoded: try encode(item.value, key: item.key, codec: target.codec, provider: target.id),
                cap: target.cap, provider: target.id, key: item.key)
            encoded[index] = value
            largestSize = max(largestSize, value.size)
            if !value.fits { someTooLarge = true }
        }
        // Where the value goes: every provider it fits (mirror), or the first available one it fits, else the first
        // unreachable one it fits, to wait in the outbox (failover). With tiering off, the preferred provider only.
        var only: Int?
        let mirrored = options.tiering != .off && options.writeMode == .mirror
        if options.tiering == .off {
            let preferred = reachable.first ?? waiting[0]
            let value = encoded[preferred]!
            guard value.fits else {
                throw value.tooLarge(
                    ", and tiering is off so it is not routed elsewhere; turn tiering on with a larger provider "
                        + "configured, or store a smaller value")
            }
            only = preferred
        } else if !mirrored {
            only = reachable.first { encoded[$0]!.fits } ?? waiting.first { encoded[$0]!.fits }
        }
        let firstChosen = mirrored ? targets.indices.first { encoded[$0]?.fits == true } : only
        guard let firstChosen else {
            let caps = targets.indices.compactMap { target -> String? in
                guard let value = encoded[target], !value.fits, let cap = value.cap else { return nil }
                return "\(targets[target].id) takes at most \(cap) bytes"
            }.joined(separator: ", ")
            let unreachable = targets.filter { target in
                !target.reachable && !target.waiting && (target.cap.map { largestSize <= $0 } ?? true)
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
        if someTooLarge {
            // Passed over for size: the ones before the chosen provider in failover, every one too small in mirror.
            let skipped = targets.indices.compactMap { target -> String? in
                guard let value = encoded[target], !value.fits, value.cap != nil,
                    options.writeMode == .mirror || target < firstChosen
                else { return nil }
                return targets[target].id
            }
            if !skipped.isEmpty { plan.skippedTooLarge[index] = skipped }
        }
        for target in targets.indices where targets[target].reachable || targets[target].waiting {
            let chosen = mirrored ? encoded[target]?.fits == true : target == only
            if chosen {
                let change = Change(item: index, target: target, encoded: encoded[target]!.encoded)
                if targets[target].reachable { plan.primary.append(change) } else { plan.queued.append(change) }
            } else if !mirrored && target > firstChosen {
                // A failover write touches only the providers a read falls through before reaching the new value:
                // one after it holds what another device wrote there, which is not this write's to remove.
                continue
            } else if targets[target].reachable {
                plan.cleanup.append(Change(item: index, target: target))
            } else {
                plan.cleanupQueued.append(Change(item: index, target: target))
            }
        }
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
    private func deliver(
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
    private func deliver(_ operation: FailedWrite.Operation, _ batch: [Delivery], to provider: any Provider) async
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
    private func send(_ operation: FailedWrite.Operation, _ batch: [Delivery], to provider: any Provider) async
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
    private func settle(
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
        let enqueue = { (failure: (change: Change, error: CloudSyncError)) -> Bool in
            failure.error.isRetryable
                && batch.enqueue(
                    FailedWrite(
                        key: key, operation: operation, encodedValue: failure.change.encoded,
                        provider: targets[failure.change.target].id, error: failure.error))
        }
        if !receipt.stored.isEmpty {
            // A partial mirror write succeeds: the value is safe somewhere.
            for failure in failures + unreachable {
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
        guard let first = (failures + unreachable).first else { return .success(receipt) }
        for failure in failures + unreachable {
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
