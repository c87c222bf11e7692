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

/// One backup under way: add a key set page by page, then ``finish(source:pipeline:tags:time:)`` writes the
/// snapshot.
///
/// Values the repository lacks are gathered into packs, each sealed and written once it holds about
/// ``BackupRepository/packBytes``; the index of the new packs and the snapshot are written at the end, in that order.
public final class BackupSession {
    let repository: BackupRepository
    private var pack: [UInt8] = []
    private var packLocations: [String: BackupRepository.Location] = [:]
    private var packID = BackupRepository.randomID()
    /// Every pack this session wrote: id -> its values' (id, offset, length).
    private var written: [String: [[Any]]] = [:]
    private var entries: [[String]] = []
    private var result = BackupResult(snapshotID: "")

    init(_ repository: BackupRepository) { self.repository = repository }

    /// Adds keys and their plaintext values to the snapshot.
    public func add(_ items: [KeyValue]) async throws(CloudSyncError) {
        for item in items {
            let (id, stored) = try await store(item.value)
            entries.append([item.key, id])
            result.keys += 1
            if stored { result.new += 1 } else { result.unchanged += 1 }
        }
    }

    /// Puts `blob` in the pack under way unless the repository (or this session) holds it already; its id, and
    /// whether it was new.
    private func store(_ blob: String) async throws(CloudSyncError) -> (id: String, new: Bool) {
        let id = repository.keys.objectID(of: blob)
        if repository.index[id] != nil || packLocations[id] != nil { return (id, false) }
        packLocations[id] = BackupRepository.Location(pack: packID, offset: pack.count, length: blob.utf8.count)
        pack += blob.utf8
        if pack.count >= repository.packBytes { try await flushPack() }
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
        for entry in entries {
            run.append(entry)
            // An unkeyed digest: the same key set is cut the same way in every repository (the cuts are only
            // inside sealed packs, so they reveal nothing).
            let boundary = SyncFingerprint.digest(of: entry[0]).first.map { "01".contains($0) } ?? false
            if boundary && run.count > 1 || run.count >= 1_000 {
                try await cut()
            }
        }
        try await cut()
        return ids
    }

    private func flushPack() async throws(CloudSyncError) {
        guard !packLocations.isEmpty else { return }
        let name = BackupRepository.prefix + "data." + packID
        result.bytesAdded += try await repository.writeObjects([(name, pack)])
        written[packID] = packLocations.map { [$0.key, $0.value.offset, $0.value.length] }
        repository.record(packLocations)
        pack = []
        packLocations = [:]
        packID = BackupRepository.randomID()
    }

    /// Writes the last pack, the index of this session's packs, then the snapshot, and returns what it wrote.
    public func finish(source: String, pipeline: String, tags: [String] = [], time: Int64)
        async throws(CloudSyncError) -> BackupResult
    {
        let trees = try await trees()
        try await flushPack()
        if !written.isEmpty {
            let name = BackupRepository.prefix + "index." + BackupRepository.randomID()
            result.bytesAdded += try await repository.writeObjects([(name, BackupRepository.json(written))])
        }
        let id = BackupRepository.randomID()
        let snapshot: [String: Any] = [
            "time": time, "source": source, "pipeline": pipeline, "tags": tags, "keys": entries.count, "trees": trees,
        ]
        result.bytesAdded += try await repository.writeObjects([
            (BackupRepository.prefix + "snapshot." + id, BackupRepository.json(snapshot))
        ])
        result.snapshotID = id
        return result
    }
}

/// One snapshot as listed: everything but its entries.
public struct SnapshotSummary: Sendable, Equatable {
    /// Its id.
    public var id: String
    /// When it was taken, in milliseconds since 1970.
    public var time: Int64
    /// The provider (or `store`) it was taken of.
    public var source: String
    /// The pipeline that took it.
    public var pipeline: String
    /// Its tags.
    public var tags: [String]
    /// How many keys it holds.
    public var keys: Int
}

extension BackupRepository {
    /// Starts a backup into this repository.
    public func startBackup() -> BackupSession { BackupSession(self) }

    /// Every snapshot, oldest first.
    public func snapshots() async throws(CloudSyncError) -> [SnapshotSummary] {
        let names = objectNames("snapshot")
        var summaries: [SnapshotSummary] = []
        for (name, plaintext) in zip(names, try await readObjects(names)) {
            let object = try snapshotObject(plaintext, name: name)
            summaries.append(
                SnapshotSummary(
                    id: String(name.dropFirst((Self.prefix + "snapshot.").count)),
                    time: (object["time"] as? NSNumber)?.int64Value ?? 0, source: object["source"] as? String ?? "",
                    pipeline: object["pipeline"] as? String ?? "", tags: object["tags"] as? [String] ?? [],
                    keys: object["keys"] as? Int ?? 0))
        }
        return summaries.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
    }

    /// The keys and values snapshot `id` holds, in key order.
    public func restore(snapshot id: String) async throws(CloudSyncError) -> [KeyValue] {
        let name = Self.prefix + "snapshot." + id
        let object = try snapshotObject(try await readObjects([name])[0], name: name)
        guard let trees = object["trees"] as? [String] else {
            throw CloudSyncError(.decode, "snapshot \(id) in \(provider) has no trees", provider: provider, key: name)
        }
        var entries: [[String]] = []
        for tree in try await blobs(trees, of: name) {
            guard let run = try? JSONSerialization.jsonObject(with: Data(tree)) as? [[String]] else {
                throw CloudSyncError(
                    .decode, "a tree of snapshot \(id) in \(provider) is damaged", provider: provider, key: name)
            }
            entries += run
        }
        let pairs = entries.filter { $0.count == 2 }
        let values = try await blobs(pairs.map { $0[1] }, of: name)
        var items: [KeyValue] = []
        items.reserveCapacity(pairs.count)
        for (pair, bytes) in zip(pairs, values) {
            items.append(KeyValue(pair[0], String(decoding: bytes, as: UTF8.self)))
        }
        return items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
    }

    /// The bytes of the blobs `ids` (values or trees), positionally, reading each pack they are in once.
    private func blobs(_ ids: [String], of name: String) async throws(CloudSyncError) -> [[UInt8]] {
        var locations: [Location] = []
        for id in ids {
            guard let location = index[id] else {
                throw CloudSyncError(
                    .decode, "\(name) in \(provider) names a blob no index holds; the repository is damaged",
                    provider: provider, key: name)
            }
            locations.append(location)
        }
        var packs: [String: [UInt8]] = [:]
        let needed = Set(locations.map(\.pack)).sorted()
        for (pack, plaintext) in zip(needed, try await readObjects(needed.map { Self.prefix + "data." + $0 })) {
            packs[pack] = plaintext
        }
        var out: [[UInt8]] = []
        out.reserveCapacity(locations.count)
        for location in locations {
            guard let bytes = packs[location.pack], location.offset + location.length <= bytes.count else {
                throw CloudSyncError(
                    .decode, "pack \(location.pack) in \(provider) is shorter than its index says", provider: provider)
            }
            out.append(Array(bytes[location.offset..<(location.offset + location.length)]))
        }
        return out
    }

    private func snapshotObject(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any] else {
            throw CloudSyncError(.decode, "\(name) in \(provider) is not a snapshot", provider: provider, key: name)
        }
        return object
    }
}
