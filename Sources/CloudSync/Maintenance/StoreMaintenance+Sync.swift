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
        guard let columns, (store.options.outbox?.count ?? 0) == 0 else {
            return try await decide(items, tags: nil, among: providers, deletes: deletes)
        }
        var toRead: [Int] = []
        toRead.reserveCapacity(items.count)
        for (item, entry) in items.enumerated() {
            guard let baseline = entry.baseline,
                providers.indices.allSatisfy({ index in
                    columns[index][item].map { baseline.recordsTag($0, for: providers[index].id) } ?? false
                })
            else {
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

    /// Reads every copy of `items` and decides each key: the part of ``syncPage(_:among:unknown:deletes:listedTags:)``
    /// for keys its listings' tags did not vouch for.
    ///
    /// `tags` holds each provider's listed tags, positionally, when every provider gave some. Per key, what each
    /// provider holds is kept in arrays indexed like `providers`, not in dictionaries by id: a sync decides every
    /// changed key of a large key set here.
    private func decide(
        _ items: [SyncItem], tags: [[String?]]?, among providers: [any Provider], deletes: SyncDeletes
    ) async throws(CloudSyncError) -> SyncPageResult {
        let ids = providers.map(\.id)
        let keys = items.map(\.key)
        let locked = keys.keySet()
        return try await store.withWriteLock(locked) { inFlight async throws(CloudSyncError) -> SyncPageResult in
            let generation = store.options.outbox?.generation
            let reads = await store.readEverywhere(keys, from: providers)
            let resolver = store.options.resolver ?? Resolver.custom { $0.first?.value }
            var result = SyncPageResult()
            result.keys = items.count
            // Only rows that change are kept: a run over keys already in sync writes nothing to the snapshot.
            func record(_ item: Int, _ fingerprint: SyncFingerprint?) {
                if items[item].baseline != fingerprint { result.snapshot.append((items[item].key, fingerprint)) }
            }
            var writes = [[CloudStore.Delivery]](repeating: [], count: providers.count)
            /// Per written item, the row to record once every write lands: its digests, and its tags where every
            /// provider's is known (`awaiting` marks the providers whose tag is the one their write answers).
            var planned: [Int: (digests: [String?], others: [(String, String)], tags: [String?]?, awaiting: [Bool])] =
                [:]
            var written: [Int] = []
            var keepRow = Set<Int>()
            // Nothing queued (the common case) means every copy is what its provider answered: the check below holds.
            let nothingQueued = (store.options.outbox?.count ?? 0) == 0
            let digestTags = providers.map(\.capabilities.tagsAreValueDigests)
            // Providers whose writes answer the version stored (see ``CloudStore/Delivered``).
            let tellsVersions = providers.map(\.capabilities.conditionalWrites)
            /// The tags every provider's listing gave `item`, positionally, when each gave one a row may record: read
            /// before the values, they vouch for those values or for older ones, never for newer ones.
            func listedTags(_ item: Int) -> [String?]? {
                guard let tags else { return nil }
                var listed = [String?](repeating: nil, count: providers.count)
                for index in providers.indices {
                    guard let tag = tags[index][item], SyncFingerprint.canRecord(tag: tag) else { return nil }
                    listed[index] = tag
                }
                return listed
            }
            /// The tags of `item`'s row once the writes marked in `writing` land, each holding the value whose digest
            /// `digests` gives: the listed tag of a provider not written; of one written, that digest where its tags
            /// are its values' digests (``ProviderCapabilities/tagsAreValueDigests``), or the version its write
            /// answers where it tells one (marked in `awaiting`); nil when some tag cannot be known.
            func plannedTags(_ item: Int, writing: [Bool], digests: [String?]) -> (tags: [String?], awaiting: [Bool])? {
                guard let tags else { return nil }
                var planned = [String?](repeating: nil, count: providers.count)
                var awaiting = [Bool](repeating: false, count: providers.count)
                for index in providers.indices {
                    if writing[index] {
                        if digestTags[index], let digest = digests[index] {
                            planned[index] = digest
                        } else if tellsVersions[index] {
                            awaiting[index] = true
                        } else {
                            return nil
                        }
                    } else {
                        guard let tag = tags[index][item], SyncFingerprint.canRecord(tag: tag) else { return nil }
                        planned[index] = tag
                    }
                }
                return (planned, awaiting)
            }
            var held = [String?](repeating: nil, count: providers.count)
            var digests = [String?](repeating: nil, count: providers.count)
            var settling = [Bool](repeating: false, count: providers.count)
            var writing = [Bool](repeating: false, count: providers.count)
            var changed: [Int] = []
            var deleted: [Int] = []
            for (item, entry) in items.enumerated() {
                let baseline = entry.baseline
                if nothingQueued, let baseline,
                    isUnchanged(item, of: entry.key, since: baseline, reads: reads, on: providers)
                {
                    result.inSync += 1
                    if baseline.digests(besides: ids).isEmpty, let tags = listedTags(item) {
                        record(item, baseline.withTags(tags, of: ids))
                    }
                    continue
                }
                let key = entry.key
                for index in providers.indices {
                    held[index] = nil
                    digests[index] = nil
                    settling[index] = false
                    writing[index] = false
                }
                changed.removeAll(keepingCapacity: true)
                deleted.removeAll(keepingCapacity: true)
                var failure: CloudSyncError?
                for (index, provider) in providers.enumerated() {
                    let read = reads[index][item]
                    let copy = store.copy(of: key, on: provider, read: read)
                    settling[index] = copy.queued
                    switch copy.content {
                    case .value(let value):
                        held[index] = value
                        guard case .success(.some(let stored)) = read else {
                            // A queued copy with nothing stored under it yet: a change either way.
                            if copy.queued || baseline?.hasDigest(for: ids[index]) == true { changed.append(index) }
                            continue
                        }
                        let digest = SyncFingerprint.digest(of: stored)
                        if !copy.queued { digests[index] = digest }
                        if copy.queued || !(baseline?.records(digest, for: ids[index]) ?? false) {
                            changed.append(index)
                        }
                    case .absent:
                        if baseline?.hasDigest(for: ids[index]) == true { deleted.append(index) }
                    case .failed(let error): failure = failure ?? error
                    case .notAsked: break
                    }
                }
                if let failure {
                    result.failed.append(KeyFailure(key: key, error: failure))
                    continue
                }
                // What unknown providers held stays in the row: they were not looked at.
                let others = baseline?.digests(besides: ids) ?? []
                let isSettling = settling.contains(true)
                if isSettling { keepRow.insert(item) }
                let names = { (indices: [Int]) in indices.map { ids[$0] } }
                var candidates: [Candidate] = []
                let propagating = baseline != nil && !deleted.isEmpty && deletes == .propagate
                if baseline != nil, !changed.isEmpty {
                    // Copies changed since the last sync beat stale ones; among several, the resolver chooses.
                    candidates = changed.map { Candidate(provider: ids[$0], value: held[$0]!) }
                    if propagating {
                        result.conflicts.append(
                            SyncConflict(
                                key: key, kind: .editedAndDeleted, editedOn: names(changed), deletedOn: names(deleted)))
                    } else if candidates.dropFirst().contains(where: { $0.value != candidates[0].value }) {
                        result.conflicts.append(
                            SyncConflict(key: key, kind: .editedOnSeveral, editedOn: names(changed), deletedOn: []))
                    }
                } else if propagating {
                    // Deleted somewhere, unchanged elsewhere. A provider that was not looked at may hold it still: its
                    // row stays whole, so the deletion is seen again once it can be listed.
                    if !others.isEmpty {
                        result.heldBack.append(key)
                    } else if !held.contains(where: { $0 != nil }) {
                        record(item, nil)
                    } else {
                        result.deletions.append(entry)
                    }
                    continue
                } else {
                    candidates = providers.indices.compactMap { index in
                        held[index].map { Candidate(provider: ids[index], value: $0) }
                    }
                }
                guard let winner = resolver.resolve(candidates) else {
                    result.inSync += 1
                    if !keepRow.contains(item) {
                        let row = SyncFingerprint(ids: ids, digests: digests, others: others)
                        record(item, row.text.isEmpty ? nil : row)
                    }
                    continue
                }
                var writesAny = false
                for (index, provider) in providers.enumerated() where held[index] != winner && !settling[index] {
                    do throws(CloudSyncError) {
                        let value = try store.encodedValue(winner, key: key, for: provider)
                        guard value.fits else {
                            result.skipped += 1
                            continue
                        }
                        writes[index].append(CloudStore.Delivery(item: item, key: key, encoded: value.encoded))
                        // Without a codec the encoded value is the copy another provider holds: its digest is known.
                        digests[index] =
                            providers.indices.lazy.compactMap { other -> String? in
                                guard !writing[other], let digest = digests[other],
                                    case .success(.some(let stored)) = reads[other][item], stored == value.encoded
                                else { return nil }
                                return digest
                            }.first ?? SyncFingerprint.digest(of: value.encoded)
                        writing[index] = true
                        writesAny = true
                    } catch {
                        result.failed.append(KeyFailure(key: key, error: error))
                        keepRow.insert(item)
                    }
                }
                if writesAny {
                    written.append(item)
                    // Once every write lands, each provider holds the winner: those not written already did.
                    let tags =
                        !isSettling && others.isEmpty
                            && providers.indices.allSatisfy({ writing[$0] || held[$0] == winner })
                        ? plannedTags(item, writing: writing, digests: digests) : nil
                    planned[item] = (
                        digests, others, tags?.tags, tags?.awaiting ?? [Bool](repeating: false, count: providers.count)
                    )
                } else {
                    result.inSync += 1
                    guard !keepRow.contains(item) else { continue }
                    let agreed = !isSettling && !held.contains(where: { $0 != winner })
                    if agreed, others.isEmpty, let tags = listedTags(item) {
                        record(item, SyncFingerprint(ids: ids, digests: digests, others: others, tags: tags))
                        continue
                    }
                    let row = SyncFingerprint(ids: ids, digests: digests, others: others)
                    if let baseline, baseline.withTags([:]) == row {
                        // The same copies as the row describes: its tags, if any, still vouch for them.
                        record(item, baseline)
                    } else {
                        record(item, row)
                    }
                }
            }
            let outcomes = await store.deliver(.set, writes, to: providers, holding: inFlight)
            let delivered = written.map { (item: $0, outcomes: outcomes[$0] ?? []) }
            let queuedFlags = store.queueRetryableFailures(
                .set, delivered, generation: generation, key: { items[$0].key },
                encoded: { item, provider in
                    // Each provider's deliveries are in item order.
                    guard let index = ids.firstIndex(of: provider) else { return nil }
                    let deliveries = writes[index]
                    var (low, high) = (0, deliveries.count)
                    while low < high {
                        let middle = (low + high) / 2
                        if deliveries[middle].item < item { low = middle + 1 } else { high = middle }
                    }
                    return low < deliveries.count && deliveries[low].item == item ? deliveries[low].encoded : nil
                })
            for ((item, results), queuedFlags) in zip(delivered, queuedFlags) {
                let tally = Self.tally(results, queued: queuedFlags, key: items[item].key)
                result.queued += tally.queued
                result.failed += tally.failed
                if tally.landed { result.repaired += 1 }
                // A write that did not land leaves the old row: the next sync sees the same changes again.
                if tally.complete, !keepRow.contains(item), let row = planned[item] {
                    var tags = row.tags
                    // The tags the writes answered, where the listing cannot tell them yet; one missing, none at all.
                    for index in providers.indices where row.awaiting[index] && tags != nil {
                        let answered = results.first { $0.provider == ids[index] }.flatMap { try? $0.result.get() }
                        if let version = answered ?? nil, SyncFingerprint.canRecord(tag: version) {
                            tags?[index] = version
                        } else {
                            tags = nil
                        }
                    }
                    record(item, SyncFingerprint(ids: ids, digests: row.digests, others: row.others, tags: tags))
                }
            }
            result.snapshot.sort { StoreKey.bytesPrecede($0.key, $1.key) }
            return result
        }
    }

    /// Whether key `item` of a page is in sync and unchanged since `baseline`.
    ///
    /// That is: every provider of the page holds the copy the baseline records for it (a provider left out keeps its
    /// digest), the copies decode to one value, and the store's resolver keeps that value. Such a key needs no write
    /// and keeps its snapshot row, which is what
    /// the full decision in ``syncPage(_:among:unknown:deletes:)`` concludes for it too; this reaches that answer
    /// comparing digests in place, for the keys a sync mostly meets. Any other key (or a copy that does not decode)
    /// is false here and goes through the full decision.
    ///
    /// The caller checks that no write is queued in the outbox, which would stand for a provider's copy.
    private func isUnchanged(
        _ item: Int, of key: String, since baseline: SyncFingerprint, reads: [[Result<String?, CloudSyncError>]],
        on providers: [any Provider]
    ) -> Bool {
        // Every digest first: a key changed anywhere is left to the full decision before any copy is decoded.
        for (index, provider) in providers.enumerated() {
            guard case .success(.some(let stored)) = reads[index][item],
                SyncFingerprint.withDigest(of: stored, { baseline.records($0, for: provider.id) })
            else { return false }
        }
        var common: String?
        for (index, provider) in providers.enumerated() {
            guard case .success(.some(let stored)) = reads[index][item],
                let value = try? store.decode(stored, key: key, from: provider)
            else { return false }
            if let common, common != value { return false }
            common = value
        }
        // Without a resolver the first copy wins, and every copy is that value.
        guard let resolver = store.options.resolver, let common else { return true }
        // The resolver sees what the full decision would give it: every copy, in preference order. One that
        // answers "none of these" leaves the key alone there too.
        guard let winner = resolver.resolve(providers.map { Candidate(provider: $0.id, value: common) }) else {
            return true
        }
        return winner == common
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
                let baseline = entry.baseline?.digests
                // A provider that held the key and cannot be reached now would bring it back: leave the key whole.
                if baseline?.keys.contains(where: { !reachable.contains($0) }) == true {
                    result.heldBack += 1
                    continue
                }
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
                if let failure {
                    result.failed.append(KeyFailure(key: entry.key, error: failure))
                } else if !unchanged {
                    result.changedSince += 1
                } else {
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
}
