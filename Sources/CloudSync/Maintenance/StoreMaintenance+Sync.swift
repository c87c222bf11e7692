/// What a sync does with a key deleted on some providers since the last sync and unchanged on the others.
public enum SyncDeletes: String, Sendable, CaseIterable, Codable {
    /// Remove it everywhere.
    case propagate
    /// Copy it back from the providers that still hold it (a plain union).
    case ignore
}

/// One key a sync page looks at, with what the last sync left (nil for a key the snapshot does not know).
public struct SyncItem: Sendable, Equatable {
    /// The key.
    public var key: String
    /// What each provider held after the last sync; nil when the key is new to the snapshot.
    public var baseline: SyncFingerprint?

    /// A key and its baseline.
    public init(key: String, baseline: SyncFingerprint?) {
        self.key = key
        self.baseline = baseline
    }
}

/// A key changed on one provider while deleted on another, or changed on several providers, since the last sync.
public struct SyncConflict: Sendable, Equatable, Codable {
    /// How the copies disagreed.
    public enum Kind: String, Sendable, Codable {
        /// Edited on some providers, deleted on others: the edit wins and the key comes back.
        case editedAndDeleted
        /// Edited differently on several providers: the store's resolver (or the preference order) chose.
        case editedOnSeveral
    }

    /// The key.
    public var key: String
    /// How the copies disagreed.
    public var kind: Kind
    /// The providers that changed it since the last sync.
    public var editedOn: [String]
    /// The providers that deleted it since the last sync.
    public var deletedOn: [String]
}

/// What one page of a sync did.
public struct SyncPageResult: Sendable {
    /// Keys looked at.
    public var keys = 0
    /// Keys every provider already held identically (or nowhere).
    public var inSync = 0
    /// Keys written to at least one provider.
    public var repaired = 0
    /// (key, provider) writes passed over because the value is larger than the provider takes.
    public var skipped = 0
    /// (key, provider) writes that failed for a reason that may pass and wait in the outbox.
    public var queued = 0
    /// Keys that could not be read, decoded or written.
    public var failed: [KeyFailure] = []
    /// Keys changed on one side and deleted or changed on another since the last sync.
    public var conflicts: [SyncConflict] = []
    /// Keys deleted on some providers and unchanged on the others: to be removed everywhere, which the caller does
    /// with ``StoreMaintenance/removeUnchanged(_:among:unknown:)`` once it knows the total is within its limit.
    public var deletions: [SyncItem] = []
    /// Keys whose deletion is held back because a provider that held them could not be listed.
    public var heldBack: [String] = []
    /// The snapshot's rows that change: a fingerprint per key, nil to remove the key's row; keys not listed keep
    /// theirs.
    public var snapshot: [(key: String, fingerprint: SyncFingerprint?)] = []
    /// Providers of the page (not `unknown`) that answered unavailable when it began, with their answers.
    ///
    /// The page was decided without them, so their copies of its keys are as unknown as an `unknown` provider's. A
    /// caller that goes on should treat them so for the rest of its walk, and must not take the walk as complete.
    public var leftOut: [String: Availability] = [:]

    /// An empty result.
    public init() {}
}

/// What removing deleted keys everywhere did.
public struct SyncRemoveResult: Sendable {
    /// Keys removed from every provider that held them (their snapshot rows can go).
    public var removed: [String] = []
    /// Keys changed again since they were found deleted, left for the next sync.
    public var changedSince = 0
    /// Keys a provider found changed by another writer between this sync's read and its removal there (a conditional
    /// removal that did not hold): left as that writer left them there, for the next sync.
    public var changedSinceRead = 0
    /// Keys left alone because a provider that held them could not be reached now; the next sync sees them again.
    public var heldBack = 0
    /// (key, provider) removes that failed for a reason that may pass and wait in the outbox.
    public var queued = 0
    /// Keys a provider failed to remove.
    public var failed: [KeyFailure] = []
}

extension StoreMaintenance {
    /// Whether no write waits in the store's outbox.
    ///
    /// While none does, every copy is the one its provider's listing shows, so listed tags a baseline records vouch
    /// for a key (as ``syncPage(_:among:unknown:deletes:listedTags:)`` takes them); a waiting write stands for a copy
    /// no listing shows.
    public var nothingQueued: Bool { (store.options.outbox?.count ?? 0) == 0 }

    /// The providers of a sync page: the chosen ones that are available and not `unknown`, in preference order, and
    /// the answers of those that are neither.
    private func participants(_ providerIDs: [String], unknown: Set<String>) async throws(CloudSyncError)
        -> (providers: [any Provider], leftOut: [String: Availability])
    {
        let configured = try store.configuredProviders()
        let chosen = (configured + store.attachedProviders()).filter { providerIDs.contains($0.id) }
        let (providers, answers) = await store.availableWithReasons(chosen)
        let known = providers.filter { !unknown.contains($0.id) }
        guard !known.isEmpty else {
            var reasons = answers.mapValues(\.description)
            for id in unknown { reasons[id] = "left out by the caller: its keys are unknown to this sync" }
            throw store.noProviderError(chosen, reasons: reasons)
        }
        let leftOut = answers.filter { !$0.value.isAvailable && !unknown.contains($0.key) }
        return (known, leftOut)
    }

    /// Syncs one page of keys (sorted, each once) across `providerIDs` against what the last sync left.
    ///
    /// Per key, each available provider not in `unknown` is compared with its digest in the baseline: unchanged,
    /// changed (or new), or deleted. A key with no baseline, or with no deletion (or deletions ignored), is made to
    /// agree as ``reconcile(_:among:)`` does, except that copies changed since the last sync beat unchanged ones and
    /// the resolver (or the preference order) only chooses among changed copies. A key deleted somewhere and
    /// unchanged elsewhere is returned in ``SyncPageResult/deletions`` (nothing is removed here); one deleted
    /// somewhere and changed elsewhere is written back from the changed copies (a conflict). A key deleted while an
    /// `unknown` provider held it is left alone. Providers in `unknown` are neither read nor written, and keep their
    /// digests in the new snapshot rows.
    ///
    /// `listedTags` holds, by provider id, the version tag each provider's listing gave each item (nil where it gave
    /// none). A key whose baseline records, for every provider of the page, the tag its listing gives now was found in
    /// sync when those tags were recorded and has not changed since on any provider: it is counted in sync without
    /// being read. A key found in sync (every provider holding one value, none written) has the listed tags recorded
    /// in its row, as long as the row names no provider left out of the page.
    public func syncPage(
        _ items: [SyncItem], among providerIDs: [String], unknown: Set<String> = [],
        deletes: SyncDeletes = .propagate, listedTags: [String: [String?]] = [:]
    ) async throws(CloudSyncError) -> SyncPageResult {
        let (providers, leftOut) = try await participants(providerIDs, unknown: unknown)
        var result = try await syncPage(items, among: providers, deletes: deletes, listedTags: listedTags)
        result.leftOut = leftOut
        return result
    }

    /// ``syncPage(_:among:unknown:deletes:listedTags:)`` among `providers`, the page's participants.
    private func syncPage(
        _ items: [SyncItem], among providers: [any Provider], deletes: SyncDeletes, listedTags: [String: [String?]]
    ) async throws(CloudSyncError) -> SyncPageResult {
        // The tags of every provider of the page, positionally, or none: a key is vouched for only by all of them.
        var columns: [[String?]]? = []
        for provider in providers {
            guard let column = listedTags[provider.id], column.count == items.count else {
                columns = nil
                break
            }
            columns?.append(column)
        }
        // A write waiting in the outbox stands for a copy no listing shows: then every key is read.
        guard let columns, nothingQueued else {
            return try await decide(items, tags: nil, among: providers, deletes: deletes)
        }
        var toRead: [Int] = []
        toRead.reserveCapacity(items.count)
        let ids = providers.map(\.id)
        for (item, entry) in items.enumerated() {
            guard let baseline = entry.baseline, baseline.recordsTags(columns, item: item, of: ids) else {
                toRead.append(item)
                continue
            }
        }
        let vouched = items.count - toRead.count
        guard vouched > 0 else { return try await decide(items, tags: columns, among: providers, deletes: deletes) }
        var result =
            toRead.isEmpty
            ? SyncPageResult()
            : try await decide(
                toRead.map { items[$0] }, tags: columns.map { column in toRead.map { column[$0] } }, among: providers,
                deletes: deletes)
        result.keys += vouched
        result.inSync += vouched
        return result
    }

    /// Reads every copy of `items`, decides each key (``SyncPageDecision``), delivers the writes and records them.
    ///
    /// The part of ``syncPage(_:among:unknown:deletes:listedTags:)`` for keys its listings' tags did not vouch for.
    /// `tags` holds each provider's listed tags, positionally, when every provider gave some.
    private func decide(
        _ items: [SyncItem], tags: [[String?]]?, among providers: [any Provider], deletes: SyncDeletes
    ) async throws(CloudSyncError) -> SyncPageResult {
        let keys = items.map(\.key)
        return try await store.withWriteLock(keys.keySet()) { inFlight async throws(CloudSyncError) -> SyncPageResult in
            let generation = store.options.outbox?.generation
            let reads = await store.readEverywhere(keys, from: providers)
            var page = SyncPageDecision(
                store: store, items: items, providers: providers, reads: reads, tags: tags, deletes: deletes)
            for item in items.indices { page.decide(item) }
            let outcomes = await store.deliver(.set, page.writes, to: providers, holding: inFlight)
            let delivered = page.written.map { (item: $0, outcomes: outcomes[$0] ?? []) }
            let planned = page
            let queued = store.queueRetryableFailures(
                .set, delivered, generation: generation, key: { items[$0].key },
                encoded: { planned.plannedWrite($0, to: $1) })
            for ((item, results), queued) in zip(delivered, queued) { page.settle(item, results, queued: queued) }
            return page.finished()
        }
    }

    /// Removes `items` from every available provider not in `unknown` that still holds them, unless a copy changed
    /// since the baseline (then the key is left for the next sync, which sees the change).
    public func removeUnchanged(_ items: [SyncItem], among providerIDs: [String], unknown: Set<String> = [])
        async throws(CloudSyncError) -> SyncRemoveResult
    {
        let providers = try await participants(providerIDs, unknown: unknown).providers
        let reachable = Set(providers.map(\.id))
        let keys = items.map(\.key)
        let locked = keys.keySet()
        return try await store.withWriteLock(locked) { inFlight async throws(CloudSyncError) -> SyncRemoveResult in
            let generation = store.options.outbox?.generation
            let reads = await store.readEverywhereVersioned(keys, from: providers)
            var result = SyncRemoveResult()
            var removes = [[CloudStore.Delivery]](repeating: [], count: providers.count)
            var removable: [Int] = []
            for (item, entry) in items.enumerated() {
                switch removal(of: entry, at: item, reads: reads, among: providers, reachable: reachable) {
                case .heldBack: result.heldBack += 1
                case .failed(let error): result.failed.append(KeyFailure(key: entry.key, error: error))
                case .changedSince: result.changedSince += 1
                case .removable(let holders):
                    removable.append(item)
                    for index in holders {
                        // Removed only as read: a value another writer lands meanwhile stays.
                        removes[index].append(
                            CloudStore.Delivery(
                                item: item, key: entry.key, encoded: nil,
                                condition: store.condition(after: reads[index][item], on: providers[index])))
                    }
                }
            }
            let outcomes = await store.deliver(.remove, removes, to: providers, holding: inFlight)
            let queuedFlags = store.queueRetryableFailures(
                .remove, removable.map { ($0, outcomes[$0] ?? []) }, generation: generation, key: { items[$0].key })
            for (item, queuedFlags) in zip(removable, queuedFlags) {
                let key = items[item].key
                let tally = Self.tally(outcomes[item] ?? [], queued: queuedFlags, key: key)
                result.queued += tally.queued
                result.failed += tally.failed
                if tally.changedSinceRead { result.changedSinceRead += 1 }
                if tally.complete { result.removed.append(key) }
            }
            return result
        }
    }

    /// What removing a key found deleted may do, the rule of a sync's deletions.
    private enum Removal {
        /// A provider that held it cannot be reached now and would bring it back: the key is left whole.
        case heldBack
        /// A copy could not be read.
        case failed(CloudSyncError)
        /// A copy changed since the baseline (or a write waits for one): the next sync sees the change.
        case changedSince
        /// Every copy is as the baseline recorded it: removed from these providers (positions), which hold it.
        case removable([Int])
    }

    private func removal(
        of entry: SyncItem, at item: Int, reads: [[Result<VersionedValue?, CloudSyncError>]],
        among providers: [any Provider], reachable: Set<String>
    ) -> Removal {
        let baseline = entry.baseline?.digests
        if baseline?.keys.contains(where: { !reachable.contains($0) }) == true { return .heldBack }
        var unchanged = true
        var holders: [Int] = []
        var failure: CloudSyncError?
        for (index, provider) in providers.enumerated() {
            if store.queuedCopy(of: entry.key, on: provider) != nil { unchanged = false }
            switch reads[index][item] {
            case .success(.some(let stored)):
                holders.append(index)
                if SyncFingerprint.digest(of: stored.value) != baseline?[provider.id] { unchanged = false }
            case .success(.none): break
            case .failure(let error): failure = failure ?? error
            }
        }
        if let failure { return .failed(failure) }
        return unchanged ? .removable(holders) : .changedSince
    }
}
