import CloudSync

/// What rebuilding a repository's index from its packs did.
public struct IndexRepair: Sendable, Equatable {
    /// Packs read.
    public var packsRead = 0
    /// Blobs the new index names.
    public var blobsIndexed = 0
    /// Packs without a header (written before format 3, or damaged) whose blobs only the old index named, kept from
    /// there.
    public var packsKeptFromOldIndex = 0
    /// Packs neither a header nor a readable old index describes: their blobs are in no index now, and a snapshot
    /// that needs one says so when restored or verified.
    public var packsNotIndexed: [String] = []
    /// Index objects replaced by the new ones.
    public var indexesReplaced = 0
}

extension BackupRepository {
    /// Rebuilds the index from the packs, as restic's `repair index` does: each pack's own header says which blobs
    /// it holds and where; a pack without one keeps what the readable old indexes said of it.
    ///
    /// The new index objects are written before the old ones are deleted, so a repair killed half way leaves both,
    /// which readers take together. Open the repository with `checking` (so a damaged index does not stop the opening),
    /// take its exclusive lock and pass it, to have it refreshed while the packs are read.
    public func repairIndex(holding lock: RepositoryLock? = nil) async throws(CloudSyncError) -> IndexRepair {
        var result = IndexRepair()
        let oldByPack = Self.entriesByPack(index)
        var rebuilt: [String: [(id: String, offset: Int, length: Int)]] = [:]
        for name in objectNames("data") {
            try await lock?.refresh()
            let pack = String(name.dropFirst((Self.prefix + "data.").count))
            result.packsRead += 1
            if case .success(let plaintext) = try await openEach([name])[0], let blobs = PackHeader.blobs(of: plaintext)
            {
                rebuilt[pack] = blobs
            } else if let old = oldByPack[pack] {
                rebuilt[pack] = old
                result.packsKeptFromOldIndex += 1
            } else {
                result.packsNotIndexed.append(pack)
            }
        }
        let oldIndexes = objectNames("index")
        _ = try await writeIndex(rebuilt)
        try await removeObjects(oldIndexes)
        index = [:]
        for (pack, blobs) in rebuilt {
            for blob in blobs { index[blob.id] = Location(pack: pack, offset: blob.offset, length: blob.length) }
        }
        result.blobsIndexed = index.count
        result.indexesReplaced = oldIndexes.count
        return result
    }
}

extension BackupRepository {
    /// The snapshot objects that do not open or parse, named with why; with `remove`, deleted too (the data only
    /// they needed is left for a prune).
    ///
    /// A damaged snapshot can never be restored, and it stops every prune (whose needs it hides); removing it is
    /// the repair restic's `repair snapshots --forget` makes. Take the exclusive lock first.
    public func repairSnapshots(remove: Bool) async throws(CloudSyncError) -> [RepositoryProblem] {
        let damaged = try await snapshotListing().damaged
        if remove { try await removeObjects(damaged.map(\.object)) }
        return damaged
    }
}
