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
    final class Target {
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
    struct Change {
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
    struct WritePlan {
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

    func write(_ operation: FailedWrite.Operation, _ items: [KeyValue]) async throws(CloudSyncError)
        -> [Result<WriteReceipt, CloudSyncError>]
    {
        let configured = try configuredProviders()
        let keys = items.map(\.key)
        // A write and an outbox flush (or a read repair) of the same key never overlap, so neither can land after
        // this write.
        return await withWriteLock(keys.keySet()) { inFlight async -> [Result<WriteReceipt, CloudSyncError>] in
            // Work begun under one account is never queued under the next.
            let generation = options.outbox?.generation
            let (targets, answers) = await writeTargets(configured)
            let (plan, refused) = planWrite(
                operation, items, targets: targets, configured: configured, answers: answers)
            let outcomes = await deliver(operation, plan.primary, to: targets, keys: keys, holding: inFlight)
            let results = settleAll(
                operation, refused: refused, keys: keys, plan: plan, outcomes: outcomes, targets: targets,
                generation: generation)
            await removeOlderCopies(
                plan, results: results, keys: keys, targets: targets, holding: inFlight, generation: generation)
            return results
        }
    }

    /// Each configured provider as a write sees it, with every provider's answer to whether it is available.
    func writeTargets(_ configured: [any Provider]) async -> (targets: [Target], answers: [String: Availability]) {
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
        return (targets, answers)
    }

    /// What the items ask of each target, and the failure of every item that cannot be written at all (its key breaks
    /// a rule, no provider can be reached or wait for it, its value fits none); nil for the others.
    func planWrite(
        _ operation: FailedWrite.Operation, _ items: [KeyValue], targets: [Target], configured: [any Provider],
        answers: [String: Availability]
    ) -> (plan: WritePlan, refused: [Result<WriteReceipt, CloudSyncError>?]) {
        let reachable = targets.indices.filter { targets[$0].reachable }
        let waiting = targets.indices.filter { targets[$0].waiting }
        let rules = keyRules(of: configured)
        var refused = [Result<WriteReceipt, CloudSyncError>?](repeating: nil, count: items.count)
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
                refused[index] = .failure(error)
            }
            plan.close(index, from: starts)
        }
        return (plan, refused)
    }

    /// Every item's result: a refused item keeps its failure, the others are settled from their outcomes.
    ///
    /// What may pass is queued for all items at once, in one outbox batch (one storage transaction), with the removal
    /// of older copies on unreachable providers for each item whose change is safe somewhere; the errors to report
    /// are reported once that batch is done.
    func settleAll(
        _ operation: FailedWrite.Operation, refused: [Result<WriteReceipt, CloudSyncError>?], keys: [String],
        plan: WritePlan, outcomes: [Result<Void, CloudSyncError>], targets: [Target], generation: Int?
    ) -> [Result<WriteReceipt, CloudSyncError>] {
        let (settled, unreported) = withOutboxBatch(generation: generation) { batch in
            var settled = refused
            var unreported: [CloudSyncError] = []
            for index in keys.indices where settled[index] == nil {
                let result = settle(
                    operation, item: index, key: keys[index], plan: plan, outcomes: outcomes, targets: targets,
                    batch: batch, unreported: &unreported)
                settled[index] = result
                // The older copies go only once the change itself is safe somewhere.
                guard case .success = result else { continue }
                for change in plan.cleanupQueued[plan.cleanupQueuedRange[index]] {
                    let provider = targets[change.target].id
                    _ = batch.enqueue(
                        FailedWrite(
                            key: keys[index], operation: .remove, encodedValue: nil, provider: provider,
                            error: CloudSyncError(.offline, "the provider was unavailable", provider: provider)))
                }
            }
            return (settled.map { $0! }, unreported)
        }
        for error in unreported { report(error) }
        return settled
    }

    /// Removes the older copies of the written items from the reachable providers a read would find them on first; a
    /// removal that fails and may pass waits in the outbox, any other failure is reported.
    func removeOlderCopies(
        _ plan: WritePlan, results: [Result<WriteReceipt, CloudSyncError>], keys: [String], targets: [Target],
        holding inFlight: Set<OutboxPair>, generation: Int?
    ) async {
        var cleanups: [Change] = []
        for index in keys.indices where !plan.cleanupRange[index].isEmpty {
            if case .success = results[index] { cleanups += plan.cleanup[plan.cleanupRange[index]] }
        }
        guard !cleanups.isEmpty else { return }
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
    }

    /// Picks the providers a value goes to by its encoded size, and the ones whose older copy must go, and adds
    /// them to `plan`; a throw adds nothing.
    ///
    /// `reachable` and `waiting` are the indices of the available and of the waiting targets; `encoded` is room for
    /// one encoded value per target, reused from item to item.
    func planSet(
        _ index: Int, _ item: KeyValue, targets: [Target], reachable: [Int], waiting: [Int],
        encoded: inout [EncodedValue?], into plan: inout WritePlan
    ) throws(CloudSyncError) {
        try encode(item, for: targets, reachable: reachable, waiting: waiting, into: &encoded)
        // Where the value goes: every provider it fits (mirror), or one (failover, or any write with tiering off).
        let mirrored = options.tiering != .off && options.writeMode == .mirror
        let only = mirrored ? nil : try singleDestination(encoded: encoded, reachable: reachable, waiting: waiting)
        let firstChosen = mirrored ? targets.indices.first { encoded[$0]?.fits == true } : only
        guard let firstChosen else { throw fitsNoTarget(item.key, encoded: encoded, targets: targets) }
        if encoded.contains(where: { $0?.fits == false }) {
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

    /// Encodes `item`'s value for each reachable and each waiting target, each with its own codec and cap, into
    /// `encoded` (the others are left nil).
    func encode(
        _ item: KeyValue, for targets: [Target], reachable: [Int], waiting: [Int], into encoded: inout [EncodedValue?]
    ) throws(CloudSyncError) {
        for target in encoded.indices { encoded[target] = nil }
        for position in 0..<(reachable.count + waiting.count) {
            let index = position < reachable.count ? reachable[position] : waiting[position - reachable.count]
            let target = targets[index]
            encoded[index] = EncodedValue(
                encoded: try encode(item.value, key: item.key, codec: target.codec, provider: target.id),
                cap: target.cap, provider: target.id, key: item.key)
        }
    }

    /// The one target a failover write, or any write with tiering off, goes to; nil when the value fits none.
    ///
    /// With tiering off that is the preferred provider, which must take the value. Otherwise it is the first available
    /// one it fits, else the first unreachable one it fits, to wait in the outbox.
    func singleDestination(encoded: [EncodedValue?], reachable: [Int], waiting: [Int]) throws(CloudSyncError) -> Int? {
        guard options.tiering == .off else {
            return reachable.first { encoded[$0]!.fits } ?? waiting.first { encoded[$0]!.fits }
        }
        let preferred = reachable.first ?? waiting[0]
        let value = encoded[preferred]!
        guard value.fits else {
            throw value.tooLarge(
                ", and tiering is off so it is not routed elsewhere; turn tiering on with a larger provider "
                    + "configured, or store a smaller value")
        }
        return preferred
    }

    /// Why a value fits no target it could go to: the ones large enough are unavailable, or none is large enough.
    func fitsNoTarget(_ key: String, encoded: [EncodedValue?], targets: [Target]) -> CloudSyncError {
        let largestSize = encoded.reduce(0) { max($0, $1?.size ?? 0) }
        let unreachable = targets.filter { target in
            !target.reachable && !target.waiting && (target.cap.map { largestSize <= $0 } ?? true)
        }
        if !unreachable.isEmpty {
            return CloudSyncError(
                .noProvider,
                "the value is \(largestSize) bytes encoded; the providers large enough for it "
                    + "(\(unreachable.map(\.id).joined(separator: ", "))) are unavailable",
                key: key)
        }
        let caps = targets.indices.compactMap { target -> String? in
            guard let value = encoded[target], !value.fits, let cap = value.cap else { return nil }
            return "\(targets[target].id) takes at most \(cap) bytes"
        }.joined(separator: ", ")
        return CloudSyncError(
            .payloadTooLarge,
            "the value is \(largestSize) bytes encoded and fits no provider (\(caps)); add a provider without a "
                + "size cap (such as sqlite, directory, googleDrive or s3) after these, or raise the tiering "
                + "thresholds",
            key: key)
    }
}
