import CloudSync
import Foundation

/// What one backup wrote.
public struct BackupResult: Sendable, Equatable {
    /// The new snapshot's id.
    public var snapshotID: String
    /// Keys in the snapshot.
    public var keys = 0
    /// Values the repository did not hold, now stored.
    public var new = 0
    /// Values it already held (under any key, from any snapshot): nothing uploaded for them.
    public var unchanged = 0
    /// Bytes of objects written (packs, index, snapshot).
    public var bytesAdded = 0
    /// Runs of the snapshot's key list that the repository did not hold (the rest are shared with earlier
    /// snapshots).
    public var treesAdded = 0
}

/// One backup under way: add a key set page by page, then ``finish(source:pipeline:tags:time:host:)`` writes the
/// snapshot.
///
/// Values the repository lacks are gathered into packs, each sealed and written once it holds about
/// ``BackupRepository/packBytes``; the index of the new packs and the snapshot are written at the end, in that order.
public final class BackupSession {
    let repository: BackupRepository
    private let packs: PackWriter
    private var entries: [[String]] = []
    private var valueBytes = 0
    private var result = BackupResult(snapshotID: "")

    init(_ repository: BackupRepository) {
        self.repository = repository
        packs = PackWriter(repository)
    }

    /// Adds keys and their plaintext values to the snapshot; the keys left out, each with why: a value larger than
    /// the repository's provider can hold in one object (`ERR_PAYLOAD_TOO_LARGE`).
    @discardableResult
    public func add(_ items: [KeyValue]) async throws(CloudSyncError) -> [KeyFailure] {
        var left: [KeyFailure] = []
        for item in items {
            let id: String
            let stored: Bool
            do throws(CloudSyncError) {
                (id, stored) = try await store(item.value, key: item.key)
            } catch  where error.code == .payloadTooLarge {
                left.append(KeyFailure(key: item.key, error: error))
                continue
            }
            entries.append([item.key, id])
            valueBytes += item.value.utf8.count
            result.keys += 1
            if stored { result.new += 1 } else { result.unchanged += 1 }
        }
        return left
    }

    /// Puts `blob` in the pack under way unless the repository (or this session) holds it already; its id, and
    /// whether it was new.
    private func store(_ blob: String, key: String? = nil) async throws(CloudSyncError) -> (id: String, new: Bool) {
        let id = repository.keys.objectID(of: blob)
        if repository.index[id] != nil || packs.holds(id) { return (id, false) }
        try await packs.add(id, blob.utf8, key: key)
        return (id, true)
    }

    /// The snapshot's entries as trees, stored in the packs like values and deduplicated the same way.
    ///
    /// A tree is a run of entries in key order, cut where a key's digest says so (one key in about 8): a change,
    /// an addition or a removal rewrites only the run it falls in, so a second snapshot of a key set that barely
    /// changed stores little more than the runs that did.
    private func trees() async throws(CloudSyncError) -> [String] {
        entries.sort { StoreKey.bytesPrecede($0[0], $1[0]) }
        var ids: [String] = []
        var run: [[String]] = []
        func cut() async throws(CloudSyncError) {
            guard !run.isEmpty else { return }
            let tree = String(decoding: BackupRepository.json(run), as: UTF8.self)
            let (id, new) = try await store(tree)
            ids.append(id)
            if new { result.treesAdded += 1 }
            run = []
        }
        var runBytes = 0
        for entry in entries {
            run.append(entry)
            runBytes += entry[0].utf8.count + 40
            // An unkeyed digest: the same key set is cut the same way in every repository (the cuts are only
            // inside sealed packs, so they reveal nothing).
            let boundary = SyncFingerprint.digest(of: entry[0]).first.map { "01".contains($0) } ?? false
            // Bounded too, by count and by bytes, so a tree always fits in a pack.
            if boundary && run.count > 1 || run.count >= 1_000 || runBytes >= repository.packBytes / 2 {
                try await cut()
                runBytes = 0
            }
        }
        try await cut()
        return ids
    }

    /// Writes the last pack, the index of this session's packs, then the snapshot, and returns what it wrote.
    public func finish(
        source: String, pipeline: String, tags: [String] = [], time: Int64,
        host: String = ProcessInfo.processInfo.hostName
    )
        async throws(CloudSyncError) -> BackupResult
    {
        let trees = try await trees()
        try await packs.finish()
        result.bytesAdded += packs.bytesWritten
        let id = BackupRepository.randomID()
        let snapshot: [String: Any] = [
            "time": time, "source": source, "pipeline": pipeline, "tags": tags, "keys": entries.count,
            "bytes": valueBytes, "host": host, "trees": trees,
        ]
        result.bytesAdded += try await repository.writeObjects([
            (BackupRepository.prefix + "snapshot." + id, BackupRepository.json(snapshot))
        ])
        result.snapshotID = id
        return result
    }
}
