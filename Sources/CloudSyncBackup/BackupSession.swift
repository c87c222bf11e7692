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
    /// Keys whose value was not read at all: the source's version tag was the one the parent snapshot recorded, so
    /// its value id was taken from there (counted in `unchanged` too).
    public var unread = 0
    /// Runs of the snapshot's key list that the repository did not hold (the rest are shared with earlier
    /// snapshots).
    public var treesAdded = 0
}

/// One backup under way: add a key set page by page, then ``finish(source:pipeline:tags:time:host:missed:)`` writes the
/// snapshot.
///
/// Values the repository lacks are gathered into packs, each sealed and written once it holds about
/// ``BackupRepository/packBytes``; the index of the new packs and the snapshot are written at the end, in that order.
public final class BackupSession {
    let repository: BackupRepository
    private let packs: PackWriter
    /// `[key, value id]`, or `[key, value id, version tag]` where the source's listing gave one.
    private var entries: [[String]] = []
    private var valueBytes = 0
    private var result = BackupResult(snapshotID: "")
    /// The parent snapshot's value id and version tag by key, for keys it recorded a tag for.
    private let parent: [String: (id: String, version: String)]
    /// Version tags of keys ``keysToRead(_:versions:)`` returned, until ``add(_:)`` records them.
    private var listedVersions: [String: String] = [:]

    /// Values longer than this are cut into chunks; a caller holding a larger one as a file should add it with
    /// ``add(key:file:)``, which never holds it whole.
    public var chunkingThreshold: Int64 { Int64(repository.chunker.threshold) }

    init(_ repository: BackupRepository, parent: [String: (id: String, version: String)] = [:]) {
        self.repository = repository
        self.parent = parent
        packs = PackWriter(repository)
    }

    /// Of one listing page's `keys` and the version tags it gave (positionally, nil where there are none), the keys
    /// whose values must be read; every other key's tag is the one the parent snapshot recorded, so it is added to
    /// this snapshot with the parent's value id, unread.
    public func keysToRead(_ keys: [String], versions: [String?]?) -> [String] {
        guard let versions, versions.count == keys.count else { return keys }
        var read: [String] = []
        for (key, version) in zip(keys, versions) {
            guard let version else {
                read.append(key)
                continue
            }
            if let earlier = parent[key], earlier.version == version, let size = repository.storedSize(of: earlier.id) {
                entries.append([key, earlier.id, version])
                valueBytes += size
                result.keys += 1
                result.unchanged += 1
                result.unread += 1
            } else {
                listedVersions[key] = version
                read.append(key)
            }
        }
        return read
    }

    /// Adds keys and their plaintext values to the snapshot; the keys left out, each with why.
    ///
    /// A value longer than the chunker's threshold is stored as content-defined chunks, so a value of any size fits
    /// and an edit stores only the chunks around it.
    @discardableResult
    public func add(_ items: [KeyValue]) async throws(CloudSyncError) -> [KeyFailure] {
        var left: [KeyFailure] = []
        for item in items {
            do throws(CloudSyncError) {
                let (id, new) =
                    item.value.utf8.count > repository.chunker.threshold
                    ? try await storeChunked(Array(item.value.utf8)) : try await store(item.value, key: item.key)
                record(item.key, id: id, bytes: item.value.utf8.count, new: new)
            } catch  where error.code == .payloadTooLarge {
                left.append(KeyFailure(key: item.key, error: error))
            }
        }
        return left
    }

    /// Adds one key whose value is `bytes`, text or not (a file of a provider that stores files); a restore gives
    /// them back as they were.
    public func add(key: String, bytes: [UInt8]) async throws(CloudSyncError) {
        let (id, new) =
            bytes.count > repository.chunker.threshold
            ? try await storeChunked(bytes) : try await storeBlob(bytes, key: key)
        record(key, id: id, bytes: bytes.count, new: new)
    }

    /// Adds one key whose value is the regular file at `path`, read a window of at most two chunks at a time, so a
    /// file of any size takes the same memory; cut exactly as ``add(key:bytes:)`` cuts the same bytes.
    public func add(key: String, file path: String) async throws(CloudSyncError) {
        let size = Int(try SourceFile.size(of: path, key: key))
        guard size > repository.chunker.threshold else {
            try await add(key: key, bytes: try FileWindow.bytes(of: path, key: key, size: size))
            return
        }
        let window = try FileWindow(path: path, key: key, size: size, span: repository.chunker.maximum)
        var chunkIDs: [String] = []
        var new = false
        while let chunk = try window.next(cut: repository.chunker.firstCut) {
            let id = repository.keys.objectID(of: chunk)
            if try await store(chunk, as: id) { new = true }
            chunkIDs.append(id)
        }
        let list = try await store(String(decoding: BackupRepository.json(chunkIDs), as: UTF8.self))
        record(key, id: ChunkedValue.entryID(size: size, list: list.id), bytes: size, new: new || list.new)
    }

    /// Records `key`'s entry (with the version tag its listing gave, if any) and counts it.
    private func record(_ key: String, id: String, bytes: Int, new: Bool) {
        if let version = listedVersions.removeValue(forKey: key) {
            entries.append([key, id, version])
        } else {
            entries.append([key, id])
        }
        valueBytes += bytes
        result.keys += 1
        if new { result.new += 1 } else { result.unchanged += 1 }
    }

    /// Puts `blob` in the pack under way unless the repository (or this session) holds it already; its id, and
    /// whether it was new.
    private func store(_ blob: String, key: String? = nil) async throws(CloudSyncError) -> (id: String, new: Bool) {
        let id = repository.keys.objectID(of: blob)
        return (id, try await store(blob.utf8, as: id, key: key))
    }

    /// Puts the blob `id` (`bytes`) in the pack under way unless the repository (or this session) holds it already;
    /// whether it was new.
    private func store(_ bytes: some Collection<UInt8>, as id: String, key: String? = nil) async throws(CloudSyncError)
        -> Bool
    {
        if repository.index[id] != nil || packs.holds(id) { return false }
        try await packs.add(id, bytes, key: key)
        return true
    }

    /// Puts the bytes of one value in the pack under way unless the repository holds them already; its id, and
    /// whether it was new.
    private func storeBlob(_ bytes: [UInt8], key: String) async throws(CloudSyncError) -> (id: String, new: Bool) {
        let id = repository.keys.objectID(of: bytes[...])
        return (id, try await store(bytes, as: id, key: key))
    }

    /// Stores `bytes` as chunks the repository lacks and a list naming them all; its entry id
    /// (``ChunkedValue/entryID(size:list:)``), and whether anything was new.
    private func storeChunked(_ bytes: [UInt8]) async throws(CloudSyncError) -> (id: String, new: Bool) {
        let ends = bytes.withUnsafeBytes { repository.chunker.cuts($0) }
        var chunkIDs: [String] = []
        chunkIDs.reserveCapacity(ends.count)
        var new = false
        var start = 0
        for end in ends {
            let chunk = bytes[start..<end]
            let id = repository.keys.objectID(of: chunk)
            if try await store(chunk, as: id) { new = true }
            chunkIDs.append(id)
            start = end
        }
        let list = try await store(String(decoding: BackupRepository.json(chunkIDs), as: UTF8.self))
        return (ChunkedValue.entryID(size: bytes.count, list: list.id), new || list.new)
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
            let tree = String(decoding: BackupRepository.json(rows: run), as: UTF8.self)
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

    /// The snapshot's fields naming `trees`: `trees` itself, or where there are more than one object should name,
    /// `treeLists` and `treeLevels`, the lists (and lists of lists) stored as blobs like trees.
    private func namedTrees(_ trees: [String]) async throws(CloudSyncError) -> [String: Any] {
        let most = repository.treeIDsPerObject
        var named = trees
        var levels = 0
        while named.count > most {
            var lists: [String] = []
            for start in stride(from: 0, to: named.count, by: most) {
                let list = Array(named[start..<min(start + most, named.count)])
                lists.append(try await store(String(decoding: BackupRepository.json(list), as: UTF8.self)).id)
            }
            named = lists
            levels += 1
        }
        return levels == 0 ? ["trees": named] : ["treeLists": named, "treeLevels": levels]
    }

    /// Writes the last pack, the index of this session's packs, then the snapshot, and returns what it wrote.
    ///
    /// `missed` counts the source's keys that could not be read and so are not in the snapshot; the snapshot records
    /// it, so a restore that removes what a snapshot lacks knows not to trust this one. Pass the `lock` the backup
    /// holds: it is confirmed first (``RepositoryLock/confirm()``), and a lock another process removed meanwhile is
    /// `ERR_LOCKED` with nothing written.
    public func finish(
        source: String, pipeline: String, tags: [String] = [], time: Int64,
        host: String = ProcessInfo.processInfo.hostName, missed: Int = 0, holding lock: RepositoryLock? = nil
    )
        async throws(CloudSyncError) -> BackupResult
    {
        // Nothing is committed unless the lock still holds: a prune that took it for stale may have deleted packs.
        try await lock?.confirm()
        let trees = try await namedTrees(try await trees())
        try await packs.finish()
        result.bytesAdded += packs.bytesWritten
        let id = BackupRepository.randomID()
        var snapshot: [String: Any] = [
            "time": time, "source": source, "pipeline": pipeline, "tags": tags, "keys": entries.count,
            "bytes": valueBytes, "host": host,
        ]
        snapshot.merge(trees) { _, new in new }
        if missed > 0 { snapshot["missed"] = missed }
        result.bytesAdded += try await repository.writeObjects([
            (BackupRepository.prefix + "snapshot." + id, BackupRepository.json(snapshot))
        ])
        result.snapshotID = id
        return result
    }
}
