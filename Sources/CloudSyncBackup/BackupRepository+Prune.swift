import CloudSync

/// What `forget` decided: the snapshots it kept and the ones it removed (or would remove, in a dry run).
public struct ForgetResult: Sendable, Equatable {
    public var kept: [SnapshotSummary] = []
    public var removed: [SnapshotSummary] = []
}

/// What `prune` removed and rewrote.
public struct PruneResult: Sendable, Equatable {
    /// Objects deleted: packs no snapshot needs, packs rewritten, and the indexes replaced.
    public var objectsDeleted = 0
    /// Bytes the repository holds fewer than before (deleted objects' bytes less what was written in their place).
    public var bytesFreed = 0
    /// Packs whose blobs still needed were copied into new packs before they were deleted.
    public var packsRewritten = 0
    /// Blobs no snapshot needs that stay in packs kept whole (under `maxUnused`).
    public var unusedBlobsKept = 0
    /// Packs no index names that were kept because they are younger than the stale window by the repository's
    /// clock: a backup under way may still index them.
    public var unindexedPacksKept = 0
}

extension BackupRepository {
    /// Removes the snapshots `policy` does not keep, and says which it kept and removed.
    ///
    /// The policy applies to every group of snapshots (one pipeline's snapshots of one source) among those carrying
    /// every tag of `tags`; snapshots without those tags are kept. With `dryRun`, decides without removing.
    public func forget(policy: KeepPolicy, tags: [String] = [], dryRun: Bool = false) async throws(CloudSyncError)
        -> ForgetResult
    {
        guard !policy.isEmpty else {
            throw CloudSyncError(
                .config,
                "forget was given an empty keep policy, which would remove every snapshot; set at least one of "
                    + KeepPolicy.ruleNames.joined(separator: ", "), provider: provider)
        }
        var result = ForgetResult()
        var groups: [String: [SnapshotSummary]] = [:]
        for snapshot in try await snapshots() {
            if tags.allSatisfy(snapshot.tags.contains) {
                groups[snapshot.pipeline + "\u{0}" + snapshot.source, default: []].append(snapshot)
            } else {
                result.kept.append(snapshot)
            }
        }
        for group in groups.values {
            let kept = policy.kept(group)
            for snapshot in group {
                if kept.contains(snapshot.id) { result.kept.append(snapshot) } else { result.removed.append(snapshot) }
            }
        }
        result.kept.sort { ($0.time, $0.id) < ($1.time, $1.id) }
        result.removed.sort { ($0.time, $0.id) < ($1.time, $1.id) }
        if !dryRun && !result.removed.isEmpty {
            try await removeObjects(result.removed.map { Self.prefix + "snapshot." + $0.id })
        }
        return result
    }

    /// Removes the data no snapshot needs.
    ///
    /// Packs none of whose blobs a snapshot needs are deleted; packs partly needed are rewritten (their needed
    /// blobs copied into new packs), most wasteful first, until unneeded bytes are at most `maxUnused` (0–1) of what
    /// remains — restic's `--max-unused`. Packs no index names (left by a backup that was killed) are deleted too,
    /// once older than ``RepositoryLock/staleAfter`` by the repository's clock where its listing tells (a backup
    /// writes its index last, so its packs are unindexed while it runs); ``PruneResult/unindexedPacksKept`` counts
    /// the younger ones.
    /// Order: new packs, one new index of everything kept, then the old indexes, then the old packs, so a prune killed
    /// at any point leaves every snapshot whole. Take the repository's exclusive lock first and pass it, to have it
    /// refreshed while the prune works. `progress` is told the packs rewritten so far and how many will be, after
    /// each.
    public func prune(
        maxUnused: Double = 0.05, holding lock: RepositoryLock? = nil,
        progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }
    ) async throws(CloudSyncError) -> PruneResult {
        if let damaged = damagedIndexes.first {
            throw CloudSyncError(
                .decode,
                "index \(damaged.object) of the backup repository in \(provider) does not open (\(damaged.message)); a "
                    + "prune would take the packs only it names for leftovers and delete them, so it removed nothing: "
                    + "run `cloudsync repair index` first, then prune", provider: provider, key: damaged.object)
        }
        var result = PruneResult()
        let needed = try await neededBlobs()
        let packs = packUsage(needed: needed)
        let present = Set(objectNames("data").map { String($0.dropFirst((Self.prefix + "data.").count)) })
        var unindexed = present.filter { packs[$0] == nil }
        let young = youngPacks(unindexed, holding: lock)
        unindexed.subtract(young)
        result.unindexedPacksKept = young.count
        let (unneeded, rewrite) = Self.packsToDrop(packs, present: present, maxUnused: maxUnused)
        let gone = unneeded.union(unindexed).union(rewrite)
        guard !gone.isEmpty else {
            result.unusedBlobsKept = index.keys.reduce(0) { $0 + (needed.contains($1) ? 0 : 1) }
            return result
        }
        let writer = PackWriter(self)
        var kept = index.filter { !gone.contains($0.value.pack) }
        let blobsOf = blobs(inPacks: Set(rewrite))
        for (done, pack) in rewrite.enumerated() {
            try await lock?.refresh()
            try await copyNeededBlobs(of: pack, blobsOf[pack] ?? [], needed: needed, into: writer)
            progress(done + 1, rewrite.count)
        }
        try await writer.flush()
        for (pack, blobs) in writer.written {
            for blob in blobs { kept[blob.id] = Location(pack: pack, offset: blob.offset, length: blob.length) }
        }
        let oldIndexes = objectNames("index")
        let newIndex = try await writeIndex(Self.entriesByPack(kept))
        // Indexed packs' sizes follow from their index entries; unindexed ones (few) and the indexes are read.
        let goneSizes = gone.subtracting(unindexed).map { packSizes[$0] ?? Self.storedSize(packs[$0]?.size ?? 0) }
            .reduce(0, +)
        let unindexedSizes = try await storedSizes(unindexed.sorted().map { Self.prefix + "data." + $0 })
        let indexSizes = try await storedSizes(oldIndexes)
        try await removeObjects(oldIndexes)
        try await removeObjects(gone.sorted().map { Self.prefix + "data." + $0 })
        index = kept
        result.objectsDeleted = oldIndexes.count + gone.count
        result.packsRewritten = rewrite.count
        result.bytesFreed = goneSizes + unindexedSizes + indexSizes - writer.bytesWritten - newIndex.bytes
        result.unusedBlobsKept = kept.keys.filter { !needed.contains($0) }.count
        return result
    }

    /// The packs of `unindexed` written less than ``RepositoryLock/staleAfter`` before `lock` was, both by the
    /// repository's clock (none where the listing gives no times, or without a lock).
    private func youngPacks(_ unindexed: Set<String>, holding lock: RepositoryLock?) -> Set<String> {
        guard let now = lock.flatMap({ objectTimes[$0.name] }) else { return [] }
        return unindexed.filter { pack in
            objectTimes[Self.prefix + "data." + pack].map { now - $0 < RepositoryLock.staleAfter } ?? false
        }
    }

    /// One indexed pack as prune weighs it: its size, and how many of its bytes a snapshot needs.
    struct PackUsage {
        var size = 0
        var used = 0

        mutating func add(at location: Location, needed: Bool) {
            size = max(size, location.offset + location.length)
            if needed { used += location.length }
        }
    }

    /// The blobs the index places in each of `packs` (the few a prune rewrites), from one pass over the index.
    func blobs(inPacks packs: Set<String>) -> [String: [(id: String, location: Location)]] {
        guard !packs.isEmpty else { return [:] }
        var blobs: [String: [(id: String, location: Location)]] = [:]
        for (id, location) in index where packs.contains(location.pack) {
            blobs[location.pack, default: []].append((id, location))
        }
        return blobs
    }

    /// Each indexed pack's size and how much of it `needed` uses.
    func packUsage(needed: Set<String>) -> [String: PackUsage] {
        var packs: [String: PackUsage] = [:]
        for (id, location) in index {
            // Changed in place, and only figures: the blobs of the few packs rewritten are gathered afterwards.
            packs[location.pack, default: PackUsage()].add(at: location, needed: needed.contains(id))
        }
        return packs
    }

    /// The present packs no snapshot needs (deleted), and the partly needed ones to rewrite, most wasteful first,
    /// until the unneeded bytes left are at most `maxUnused` of what remains.
    static func packsToDrop(_ packs: [String: PackUsage], present: Set<String>, maxUnused: Double)
        -> (unneeded: Set<String>, rewrite: [String])
    {
        var unneeded = Set<String>()
        var partial: [(pack: String, unused: Int)] = []
        var unused = 0
        var total = 0
        for (pack, info) in packs where present.contains(pack) {
            if info.used == 0 {
                unneeded.insert(pack)
            } else {
                total += info.size
                if info.used < info.size {
                    partial.append((pack, info.size - info.used))
                    unused += info.size - info.used
                }
            }
        }
        var rewrite: [String] = []
        for candidate in partial.sorted(by: { ($0.unused, $0.pack) > ($1.unused, $1.pack) }) {
            guard Double(unused) > maxUnused * Double(total) else { break }
            rewrite.append(candidate.pack)
            unused -= candidate.unused
            total -= candidate.unused
        }
        return (unneeded, rewrite)
    }

    /// Copies the blobs of `pack` a snapshot needs into `writer`'s new packs; a pack shorter than its index says
    /// stops the prune before anything is deleted.
    private func copyNeededBlobs(
        of pack: String, _ blobs: [(id: String, location: Location)], needed: Set<String>, into writer: PackWriter
    ) async throws(CloudSyncError) {
        let bytes = try await readObjects([Self.prefix + "data." + pack])[0]
        for blob in blobs where needed.contains(blob.id) {
            let end = blob.location.offset + blob.location.length
            guard end <= bytes.count else {
                throw CloudSyncError(
                    .decode,
                    "pack \(pack) in \(provider) is shorter than its index says; prune stopped before deleting "
                        + "anything", provider: provider, key: Self.prefix + "data." + pack)
            }
            try await writer.add(blob.id, bytes[blob.location.offset..<end])
        }
    }

    /// The ids of every blob a snapshot needs: its trees (and tree lists), its values, and each chunked value's list
    /// and chunks.
    ///
    /// The trees of all snapshots are gathered first and read together, so a pack of trees is read once however
    /// many snapshots share it.
    func neededBlobs() async throws(CloudSyncError) -> Set<String> {
        var trees: Set<String> = []
        var lists: Set<String> = []
        for snapshot in try await snapshotsWithTrees() {
            trees.formUnion(snapshot.trees)
            lists.formUnion(snapshot.lists)
        }
        let name = Self.prefix + "snapshot.*"
        // Into the largest set, in place: a union would copy a million ids.
        var needed = try await valueBlobs(of: try await valueIDs(ofTrees: Array(trees), in: name), in: name)
        needed.formUnion(trees)
        needed.formUnion(lists)
        return needed
    }

    /// Deletes objects, failing on the first that could not be deleted.
    func removeObjects(_ names: [String]) async throws(CloudSyncError) {
        guard !names.isEmpty else { return }
        for outcome in try await store.remove(names, from: provider) { try outcome.get() }
        forgetNames(names)
    }

    /// The bytes objects take as stored (absent ones count 0).
    private func storedSizes(_ names: [String]) async throws(CloudSyncError) -> Int {
        guard !names.isEmpty else { return 0 }
        guard objectsAsFiles else {
            let read = try await store.read(names, from: provider).reduce(0) { $0 + ($1?.utf8.count ?? 0) }
            countRead(read)
            return read
        }
        var total = 0
        for name in names { total += Int(try await store.fileSize(name, on: provider) ?? 0) }
        return total
    }

    /// What a sealed object of `plaintext` bytes takes as stored, uncompressed (format 1): base64 of nonce,
    /// ciphertext and tag.
    static func storedSize(_ plaintext: Int) -> Int { (plaintext + 40 + 2) / 3 * 4 }
}
