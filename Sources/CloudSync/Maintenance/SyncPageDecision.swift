/// The decision of one sync page, key by key, once every copy has been read.
///
/// Per key: what each provider holds against the key's baseline, who wins, what is written, what is left for
/// deletion or held back, and the snapshot row the key leaves. ``StoreMaintenance`` reads the copies before it and
/// delivers the writes after it; it makes no call itself.
///
/// What each provider holds is kept in arrays indexed like `providers`, reused from key to key: a sync decides every
/// changed key of a large key set here.
struct SyncPageDecision {
    /// The row a written key records once every write lands: its digests, what unlooked-at providers held, and its
    /// tags where every provider's is known (`awaiting` marks the providers whose tag is the one their write answers).
    struct PlannedRow {
        var digests: [String?]
        var others: [(String, String)]
        var tags: [String?]?
        var awaiting: [Bool]
    }

    /// One key's copies, by provider position.
    struct Copies {
        /// The value each provider holds (a queued write's when one waits), nil where it holds none.
        var held: [String?]
        /// The digest of each stored copy, and of each planned write.
        var digests: [String?]
        /// Providers whose copy is a write still waiting in the outbox.
        var settling: [Bool]
        /// Providers the page writes.
        var writing: [Bool]
        /// Providers whose copy changed since the baseline.
        var changed: [Int] = []
        /// Providers that held the key at the baseline and hold nothing now.
        var deleted: [Int] = []

        init(providers: Int) {
            held = [String?](repeating: nil, count: providers)
            digests = held
            settling = [Bool](repeating: false, count: providers)
            writing = settling
        }

        mutating func clear() {
            for index in held.indices {
                held[index] = nil
                digests[index] = nil
                settling[index] = false
                writing[index] = false
            }
            changed.removeAll(keepingCapacity: true)
            deleted.removeAll(keepingCapacity: true)
        }
    }

    let store: CloudStore
    let items: [SyncItem]
    let providers: [any Provider]
    let ids: [String]
    /// Each provider's read of each item.
    let reads: [[Result<String?, CloudSyncError>]]
    /// Each provider's listed tags, positionally, when every provider gave some.
    let tags: [[String?]]?
    let deletes: SyncDeletes
    let resolver: Resolver
    /// Nothing waits in the outbox (the common case): every copy is what its provider answered.
    let nothingQueued: Bool
    /// Providers whose tags are their values' digests (``ProviderCapabilities/tagsAreValueDigests``).
    let digestTags: [Bool]
    /// Providers whose writes answer the version stored (see ``CloudStore/Delivered``).
    let tellsVersions: [Bool]

    private(set) var result = SyncPageResult()
    /// The writes to deliver, by provider position, each provider's in item order.
    private(set) var writes: [[CloudStore.Delivery]]
    /// The items written, in order.
    private(set) var written: [Int] = []
    private var planned: [Int: PlannedRow] = [:]
    /// Items whose row must stay as it is: a write waits for them in the outbox, or one could not be encoded.
    private var keepRow = Set<Int>()
    private var copies: Copies

    init(
        store: CloudStore, items: [SyncItem], providers: [any Provider],
        reads: [[Result<String?, CloudSyncError>]], tags: [[String?]]?, deletes: SyncDeletes
    ) {
        self.store = store
        self.items = items
        self.providers = providers
        self.reads = reads
        self.tags = tags
        self.deletes = deletes
        ids = providers.map(\.id)
        resolver = store.options.resolver ?? Resolver.custom { $0.first?.value }
        nothingQueued = (store.options.outbox?.count ?? 0) == 0
        digestTags = providers.map(\.capabilities.tagsAreValueDigests)
        tellsVersions = providers.map(\.capabilities.conditionalWrites)
        writes = [[CloudStore.Delivery]](repeating: [], count: providers.count)
        copies = Copies(providers: providers.count)
        result.keys = items.count
    }

    // MARK: Deciding

    /// Decides key `item`: in sync, written, left for deletion, held back, or failed.
    mutating func decide(_ item: Int) {
        let entry = items[item]
        if nothingQueued, let baseline = entry.baseline, isUnchanged(item, since: baseline) {
            result.inSync += 1
            if baseline.digests(besides: ids).isEmpty, let tags = listedTags(item, digests: baseline) {
                record(item, baseline.withTags(tags, of: ids))
            }
            return
        }
        copies.clear()
        if let failure = examine(item) {
            result.failed.append(KeyFailure(key: entry.key, error: failure))
            return
        }
        // What unknown providers held stays in the row: they were not looked at.
        let others = entry.baseline?.digests(besides: ids) ?? []
        if copies.settling.contains(true) { keepRow.insert(item) }
        guard let candidates = contenders(item, others: others) else { return }
        guard let winner = resolver.resolve(candidates) else {
            // The resolver keeps none of them: the key is left as it is.
            result.inSync += 1
            if !keepRow.contains(item) {
                let row = SyncFingerprint(ids: ids, digests: copies.digests, others: others)
                record(item, row.text.isEmpty ? nil : row)
            }
            return
        }
        if planWrites(item, of: winner) {
            planRow(item, winner: winner, others: others)
        } else {
            recordAgreement(item, winner: winner, others: others)
        }
    }

    /// Reads what each provider holds for `item` into ``copies``, against its baseline; the first error of a copy
    /// that could not be read or decoded.
    private mutating func examine(_ item: Int) -> CloudSyncError? {
        let key = items[item].key
        let baseline = items[item].baseline
        var failure: CloudSyncError?
        for (index, provider) in providers.enumerated() {
            let read = reads[index][item]
            let copy = store.copy(of: key, on: provider, read: read)
            copies.settling[index] = copy.queued
            switch copy.content {
            case .value(let value):
                copies.held[index] = value
                guard case .success(.some(let stored)) = read else {
                    // A queued copy with nothing stored under it yet: a change either way.
                    if copy.queued || baseline?.hasDigest(for: ids[index]) == true { copies.changed.append(index) }
                    continue
                }
                let digest = SyncFingerprint.digest(of: stored)
                if !copy.queued { copies.digests[index] = digest }
                if copy.queued || !(baseline?.records(digest, for: ids[index]) ?? false) {
                    copies.changed.append(index)
                }
            case .absent:
                if baseline?.hasDigest(for: ids[index]) == true { copies.deleted.append(index) }
            case .failed(let error): failure = failure ?? error
            case .notAsked: break
            }
        }
        return failure
    }

    /// Who may win `item`, the rule of a sync: copies changed since the last sync beat unchanged ones (and a change
    /// beats a deletion, a conflict either way); a key deleted somewhere and unchanged elsewhere is for deletion, and
    /// nil is answered; a key new to the snapshot, or whose deletions are ignored, is decided among every copy.
    private mutating func contenders(_ item: Int, others: [(String, String)]) -> [Candidate]? {
        let entry = items[item]
        let propagating = entry.baseline != nil && !copies.deleted.isEmpty && deletes == .propagate
        if entry.baseline != nil, !copies.changed.isEmpty {
            let candidates = copies.changed.map { Candidate(provider: ids[$0], value: copies.held[$0]!) }
            let editedOn = copies.changed.map { ids[$0] }
            if propagating {
                result.conflicts.append(
                    SyncConflict(
                        key: entry.key, kind: .editedAndDeleted, editedOn: editedOn,
                        deletedOn: copies.deleted.map { ids[$0] }))
            } else if candidates.dropFirst().contains(where: { $0.value != candidates[0].value }) {
                result.conflicts.append(
                    SyncConflict(key: entry.key, kind: .editedOnSeveral, editedOn: editedOn, deletedOn: []))
            }
            return candidates
        }
        if propagating {
            settleDeletion(item, others: others)
            return nil
        }
        return providers.indices.compactMap { index in
            copies.held[index].map { Candidate(provider: ids[index], value: $0) }
        }
    }

    /// What becomes of a key deleted somewhere and unchanged elsewhere: held back while a provider that was not
    /// looked at may hold it still (its row stays whole, so the deletion is seen again once it can be listed), its row
    /// dropped when no provider holds it any more, else left for deletion everywhere.
    private mutating func settleDeletion(_ item: Int, others: [(String, String)]) {
        if !others.isEmpty {
            result.heldBack.append(items[item].key)
        } else if !copies.held.contains(where: { $0 != nil }) {
            record(item, nil)
        } else {
            result.deletions.append(items[item])
        }
    }

    /// Plans a write of `winner` to every provider of `item` that holds something else and has no write waiting;
    /// whether any was planned.
    private mutating func planWrites(_ item: Int, of winner: String) -> Bool {
        let key = items[item].key
        var writesAny = false
        for (index, provider) in providers.enumerated()
        where copies.held[index] != winner && !copies.settling[index] {
            do throws(CloudSyncError) {
                let value = try store.encodedValue(winner, key: key, for: provider)
                guard value.fits else {
                    result.skipped += 1
                    continue
                }
                writes[index].append(CloudStore.Delivery(item: item, key: key, encoded: value.encoded))
                copies.digests[index] = digestOfCopy(item, encoded: value.encoded)
                copies.writing[index] = true
                writesAny = true
            } catch {
                result.failed.append(KeyFailure(key: key, error: error))
                keepRow.insert(item)
            }
        }
        return writesAny
    }

    /// The digest of `encoded`, taken from a provider that stores exactly it when one does: without a codec the
    /// encoded value is the copy another provider holds.
    private func digestOfCopy(_ item: Int, encoded: String) -> String {
        providers.indices.lazy.compactMap { other -> String? in
            guard !copies.writing[other], let digest = copies.digests[other],
                case .success(.some(let stored)) = reads[other][item], stored == encoded
            else { return nil }
            return digest
        }.first ?? SyncFingerprint.digest(of: encoded)
    }

    /// Keeps the row `item` records once its writes land: every provider then holds the winner, those not written
    /// already did.
    private mutating func planRow(_ item: Int, winner: String, others: [(String, String)]) {
        written.append(item)
        let knowsEveryTag =
            !copies.settling.contains(true) && others.isEmpty
            && providers.indices.allSatisfy { copies.writing[$0] || copies.held[$0] == winner }
        let tags = knowsEveryTag ? plannedTags(item) : nil
        planned[item] = PlannedRow(
            digests: copies.digests, others: others, tags: tags?.tags,
            awaiting: tags?.awaiting ?? [Bool](repeating: false, count: providers.count))
    }

    /// Records `item`, which needs no write: with the listed tags when every provider holds the winner, else as the
    /// baseline when it describes the same copies (its tags, if any, still vouch for them), else as found.
    private mutating func recordAgreement(_ item: Int, winner: String, others: [(String, String)]) {
        result.inSync += 1
        guard !keepRow.contains(item) else { return }
        let agreed = !copies.settling.contains(true) && !copies.held.contains(where: { $0 != winner })
        if agreed, others.isEmpty, let tags = listedTags(item, digests: copies.digests) {
            record(item, SyncFingerprint(ids: ids, digests: copies.digests, others: others, tags: tags))
            return
        }
        let row = SyncFingerprint(ids: ids, digests: copies.digests, others: others)
        if let baseline = items[item].baseline, baseline.withTags([:]) == row {
            record(item, baseline)
        } else {
            record(item, row)
        }
    }

    /// Keeps `fingerprint` as `item`'s new row, when it differs from the baseline: a run over keys already in sync
    /// writes nothing to the snapshot.
    private mutating func record(_ item: Int, _ fingerprint: SyncFingerprint?) {
        if items[item].baseline != fingerprint { result.snapshot.append((items[item].key, fingerprint)) }
    }

    // MARK: Tags

    /// The tags every provider's listing gave `item`, positionally, when each gave one a row may record: read before
    /// the values, they vouch for those values or for older ones, never for newer ones.
    ///
    /// A provider whose tags are its values' digests and whose listing gave none (a change feed's keys carry no tag)
    /// has the digest of the copy it holds, `digests(index)`, as its tag: that is the tag its listing gives while it
    /// holds that copy. So keys an incremental run settles are not read again by the next full comparison.
    private func listedTags(_ item: Int, digests: [String?]) -> [String?]? {
        guard let tags else { return nil }
        var listed = [String?](repeating: nil, count: providers.count)
        for index in providers.indices {
            var tag = tags[index][item]
            if tag == nil, digestTags[index] { tag = digests[index] }
            guard let tag, SyncFingerprint.canRecord(tag: tag) else { return nil }
            listed[index] = tag
        }
        return listed
    }

    /// ``listedTags(_:digests:)`` of a key found unchanged since `baseline`: each provider holds the copy whose
    /// digest the baseline records.
    private func listedTags(_ item: Int, digests baseline: SyncFingerprint) -> [String?]? {
        guard let tags else { return nil }
        // The baseline's digests are spelled out only for a key some listing gave no tag (a change feed's).
        guard providers.indices.contains(where: { tags[$0][item] == nil }) else {
            return listedTags(item, digests: [])
        }
        let recorded = baseline.digests
        return listedTags(item, digests: ids.map { recorded[$0] })
    }

    /// The tags of `item`'s row once its planned writes land, each holding the value whose digest ``copies`` gives:
    /// the listed tag of a provider not written; of one written, that digest where its tags are its values' digests,
    /// or the version its write answers where it tells one (marked in `awaiting`); nil when some tag cannot be known.
    private func plannedTags(_ item: Int) -> (tags: [String?], awaiting: [Bool])? {
        guard let tags else { return nil }
        var planned = [String?](repeating: nil, count: providers.count)
        var awaiting = [Bool](repeating: false, count: providers.count)
        for index in providers.indices {
            if copies.writing[index] {
                if digestTags[index], let digest = copies.digests[index] {
                    planned[index] = digest
                } else if tellsVersions[index] {
                    awaiting[index] = true
                } else {
                    return nil
                }
            } else {
                // A copy not written keeps its listed tag, or its digest where that is its tag (see ``listedTags``).
                var tag = tags[index][item]
                if tag == nil, digestTags[index] { tag = copies.digests[index] }
                guard let tag, SyncFingerprint.canRecord(tag: tag) else { return nil }
                planned[index] = tag
            }
        }
        return (planned, awaiting)
    }

    // MARK: After the writes

    /// The encoded value planned for `item` at `provider`, for the outbox to keep when its write failed.
    func plannedWrite(_ item: Int, to provider: String) -> String? {
        guard let index = ids.firstIndex(of: provider) else { return nil }
        // Each provider's deliveries are in item order.
        let deliveries = writes[index]
        var (low, high) = (0, deliveries.count)
        while low < high {
            let middle = (low + high) / 2
            if deliveries[middle].item < item { low = middle + 1 } else { high = middle }
        }
        return low < deliveries.count && deliveries[low].item == item ? deliveries[low].encoded : nil
    }

    /// Counts what the writes of `item` did and, when every one landed, records its planned row with the tags the
    /// writes answered; a write that did not land leaves the old row, so the next sync sees the same changes again.
    mutating func settle(_ item: Int, _ results: [(provider: String, result: CloudStore.Delivered)], queued: [Bool]) {
        let tally = StoreMaintenance.tally(results, queued: queued, key: items[item].key)
        result.queued += tally.queued
        result.failed += tally.failed
        if tally.landed { result.repaired += 1 }
        guard tally.complete, !keepRow.contains(item), let row = planned[item] else { return }
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

    /// The page's result, its snapshot rows in key order.
    func finished() -> SyncPageResult {
        var result = result
        result.snapshot.sort { StoreKey.bytesPrecede($0.key, $1.key) }
        return result
    }

    // MARK: The fast path

    /// Whether key `item` is in sync and unchanged since `baseline`.
    ///
    /// That is: every provider of the page holds the copy the baseline records for it (a provider left out keeps its
    /// digest), the copies decode to one value, and the store's resolver keeps that value. Such a key needs no write
    /// and keeps its snapshot row, which is what the full decision concludes for it too; this reaches that answer
    /// comparing digests in place, for the keys a sync mostly meets. Any other key (or a copy that does not decode) is
    /// false here and goes through the full decision. Only asked while nothing waits in the outbox, which would stand
    /// for a provider's copy.
    private func isUnchanged(_ item: Int, since baseline: SyncFingerprint) -> Bool {
        // Every digest first: a key changed anywhere is left to the full decision before any copy is decoded.
        for (index, provider) in providers.enumerated() {
            guard case .success(.some(let stored)) = reads[index][item],
                SyncFingerprint.withDigest(of: stored, { baseline.records($0, for: provider.id) })
            else { return false }
        }
        var common: String?
        for (index, provider) in providers.enumerated() {
            guard case .success(.some(let stored)) = reads[index][item],
                let value = try? store.decode(stored, key: items[item].key, from: provider)
            else { return false }
            if let common, common != value { return false }
            common = value
        }
        // Without a resolver the first copy wins, and every copy is that value.
        guard let resolver = store.options.resolver, let common else { return true }
        // The resolver sees what the full decision would give it: every copy, in preference order. One that answers
        // "none of these" leaves the key alone there too.
        guard let winner = resolver.resolve(providers.map { Candidate(provider: $0.id, value: common) }) else {
            return true
        }
        return winner == common
    }
}
