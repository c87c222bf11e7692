import CloudSync
import Foundation

/// What a restore hands over: a page of text values, or one value in a temporary file.
public enum RestoredItem: Sendable {
    /// Text values, a page of them.
    case values([KeyValue])
    /// One value that is large (it was stored in chunks) or not UTF-8 text, in the temporary file at `path`
    /// (`size` bytes), which is removed once the handler returns.
    case file(key: String, path: String, size: Int)
    /// A key whose value cannot be read: its pack is damaged, or no index or pack header says where its blob is.
    /// The rest of the snapshot is still handed over.
    case unreadable(key: String, error: CloudSyncError)
    /// A run of the snapshot's keys that cannot be read (its tree's pack is damaged): which keys it held is not known.
    /// The other runs' keys are still handed over; nothing should be removed for being absent from the snapshot.
    case unreadableTree(id: String, error: CloudSyncError)
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
    /// The bytes of its values, as they were read from the source (0 for a snapshot that did not record them).
    public var bytes: Int
    /// The machine that took it.
    public var host: String
    /// Keys of the source it left out because they could not be read (0 for a whole snapshot).
    public var missed: Int

    /// A summary; see the properties for what each argument means.
    public init(
        id: String, time: Int64, source: String, pipeline: String, tags: [String], keys: Int, bytes: Int, host: String,
        missed: Int = 0
    ) {
        self.missed = missed
        self.id = id
        self.time = time
        self.source = source
        self.pipeline = pipeline
        self.tags = tags
        self.keys = keys
        self.bytes = bytes
        self.host = host
    }
}

extension BackupRepository {
    /// Starts a backup into this repository.
    public func startBackup() -> BackupSession { BackupSession(self) }

    /// Starts a backup that takes `parent`'s value ids for keys whose source version tag has not moved since, without
    /// reading them (``BackupSession/keysToRead(_:versions:)``); the parent is usually the newest snapshot of the same
    /// pipeline and source.
    public func startBackup(after parent: SnapshotSummary?) async throws(CloudSyncError) -> BackupSession {
        guard let parent else { return BackupSession(self) }
        var known: [String: (id: String, version: String)] = [:]
        for entry in try await entries(
            ofTrees: try await treeIDs(of: parent.id), in: Self.prefix + "snapshot." + parent.id)
        where entry.count == 3 {
            known[entry[0]] = (entry[1], entry[2])
        }
        return BackupSession(self, parent: known)
    }

    /// Every snapshot whose object opens, oldest first; see ``snapshotListing()`` for the ones that do not.
    public func snapshots() async throws(CloudSyncError) -> [SnapshotSummary] {
        try await snapshotListing().snapshots
    }

    /// Every snapshot whose object opens, oldest first, and each snapshot object that does not open or parse, named
    /// with why: one damaged snapshot hides no other.
    public func snapshotListing() async throws(CloudSyncError)
        -> (snapshots: [SnapshotSummary], damaged: [RepositoryProblem])
    {
        let (found, damaged) = try await readSnapshots()
        return (found.map(\.summary), damaged)
    }

    /// Every snapshot, oldest first, with the ids of its trees and of the tree lists naming them, from one read of
    /// the snapshot objects; one that does not open or names no trees is `ERR_DECODE` naming it (a prune must know
    /// what every snapshot needs).
    func snapshotsWithTrees() async throws(CloudSyncError)
        -> [(summary: SnapshotSummary, trees: [String], lists: [String])]
    {
        let (found, damaged) = try await readSnapshots()
        if let first = damaged.first {
            throw CloudSyncError(first.code, first.message, provider: provider, key: first.object)
        }
        var resolved: [(summary: SnapshotSummary, trees: [String], lists: [String])] = []
        for snapshot in found {
            let (trees, lists) = try await treeIDs(snapshot.trees, in: Self.prefix + "snapshot." + snapshot.summary.id)
            resolved.append((snapshot.summary, trees, lists))
        }
        return resolved
    }

    /// The snapshots that open, oldest first, with their trees, and the snapshot objects that do not.
    private func readSnapshots() async throws(CloudSyncError)
        -> (found: [(summary: SnapshotSummary, trees: SnapshotTrees)], damaged: [RepositoryProblem])
    {
        let names = objectNames("snapshot")
        var found: [(summary: SnapshotSummary, trees: SnapshotTrees)] = []
        var damaged: [RepositoryProblem] = []
        for (name, opened) in zip(names, try await openEach(names)) {
            do throws(CloudSyncError) {
                found.append(try snapshot(try opened.get(), name: name))
            } catch  where error.code == .decode {
                damaged.append(RepositoryProblem(object: name, message: error.message, code: error.code))
            }
        }
        found.sort { ($0.summary.time, $0.summary.id) < ($1.summary.time, $1.summary.id) }
        return (found, damaged)
    }

    /// The summary and trees of the snapshot object `name` whose plaintext is `plaintext`; `ERR_DECODE` when it is not
    /// a snapshot or names no trees.
    private func snapshot(_ plaintext: [UInt8], name: String) throws(CloudSyncError)
        -> (summary: SnapshotSummary, trees: SnapshotTrees)
    {
        let object = try snapshotObject(plaintext, name: name)
        let summary = SnapshotSummary(
            id: String(name.dropFirst((Self.prefix + "snapshot.").count)),
            time: (object["time"] as? NSNumber)?.int64Value ?? 0, source: object["source"] as? String ?? "",
            pipeline: object["pipeline"] as? String ?? "", tags: object["tags"] as? [String] ?? [],
            keys: object["keys"] as? Int ?? 0, bytes: object["bytes"] as? Int ?? 0,
            host: object["host"] as? String ?? "", missed: object["missed"] as? Int ?? 0)
        return (summary, try SnapshotTrees(object, name: name, provider: provider))
    }

    /// The keys and values snapshot `id` holds, in key order, all at once; ``restore(snapshot:pageSize:keys:_:)``
    /// streams them instead, pack by pack.
    public func restore(snapshot id: String) async throws(CloudSyncError) -> [KeyValue] {
        var items: [KeyValue] = []
        try await restore(snapshot: id) { page throws(CloudSyncError) in items += page }
        return items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
    }

    /// The keys of snapshot `id`, in key order, without their values.
    public func keys(ofSnapshot id: String) async throws(CloudSyncError) -> [String] {
        try await entries(ofTrees: try await treeIDs(of: id), in: Self.prefix + "snapshot." + id).map { $0[0] }
    }

    /// Hands snapshot `id`'s keys (those `keys` accepts) and values to `body`, `pageSize` at a time, pack by pack.
    ///
    /// For snapshots of text: a value that is not UTF-8 text (a binary file backed up from a provider that stores
    /// files) is `ERR_DECODE` naming its key; ``restore(snapshot:pageSize:keys:items:)`` gives such values as files.
    public func restore(
        snapshot id: String, pageSize: Int = 1000, keys filter: ((String) -> Bool)? = nil,
        _ body: ([KeyValue]) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        try await restore(snapshot: id, pageSize: pageSize, keys: filter) { item throws(CloudSyncError) in
            switch item {
            case .values(let page): try await body(page)
            case .unreadable(_, let error), .unreadableTree(_, let error): throw error
            case .file(let key, let path, let size):
                guard let text = String(validating: try FileWindow.bytes(of: path, key: key, size: size), as: UTF8.self)
                else {
                    throw CloudSyncError(
                        .decode,
                        "\(key) in snapshot \(id) of \(provider) is not UTF-8 text (a binary file); restore it into a "
                            + "provider that stores files", provider: provider, key: key)
                }
                try await body([KeyValue(key, text)])
            }
        }
    }

    /// The most bytes of values one page of a restore holds (fewer keys than its page size when they are large).
    static let restorePageBytes = 8 << 20

    /// Hands snapshot `id`'s keys (those `keys` accepts) and values to `body`: text values `pageSize` at a time (or
    /// ``restorePageBytes`` of them), pack by pack, and each value that is large (chunked) or not UTF-8 text alone, as a temporary file.
    ///
    /// Each pack of text values is read once, and only one pack and one page are held in memory, never the whole
    /// snapshot; a chunked value is written to its file chunk by chunk, so a value of any size takes the memory of a
    /// pack. Pages come in the order of the packs, each pack's keys in key order; files come after.
    public func restore(
        snapshot id: String, pageSize: Int = 1000, keys filter: ((String) -> Bool)? = nil,
        items body: (RestoredItem) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        let name = Self.prefix + "snapshot." + id
        var byPack: [String: [(key: String, location: Location)]] = [:]
        var chunked: [(key: String, value: (size: Int, list: String))] = []
        let (pairs, lost) = try await readableEntries(ofTrees: try await treeIDs(of: id), in: name)
        for (tree, error) in lost { try await body(.unreadableTree(id: tree, error: error)) }
        for pair in pairs where filter?(pair[0]) ?? true {
            if let value = ChunkedValue.parse(pair[1]) {
                chunked.append((pair[0], value))
            } else if let location = try await location(of: pair[1]) {
                byPack[location.pack, default: []].append((pair[0], location))
            } else {
                try await body(.unreadable(key: pair[0], error: unlocated(pair[1], in: name)))
            }
        }
        try await restorePacks(byPack, pageSize: max(1, pageSize), to: body)
        // Chunked values last, one at a time, each written to its file chunk by chunk.
        for (key, value) in chunked {
            do throws(CloudSyncError) {
                try await handOver(key, value.size, to: body) { file throws(CloudSyncError) in
                    try await writeChunkedValue(value, of: name, to: file)
                }
            } catch  where error.code == .decode {
                try await body(.unreadable(key: key, error: error))
            }
        }
    }

    /// Hands over the values `byPack` places, each pack read once: text in pages of `pageSize` (or
    /// ``restorePageBytes``), the rest as files, and the keys of a damaged pack as unreadable.
    private func restorePacks(
        _ byPack: [String: [(key: String, location: Location)]], pageSize: Int,
        to body: (RestoredItem) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        var page: [KeyValue] = []
        page.reserveCapacity(pageSize)
        var pageBytes = 0
        for pack in byPack.keys.sorted() {
            let object = Self.prefix + "data." + pack
            let bytes: [UInt8]
            switch try await openEach([object])[0] {
            case .success(let opened): bytes = opened
            case .failure(let error) where error.code == .decode:
                // A damaged pack loses the values in it, not the snapshot.
                for (key, _) in byPack[pack]! { try await body(.unreadable(key: key, error: error)) }
                continue
            case .failure(let error): throw error
            }
            for (key, location) in byPack[pack]! {
                guard location.offset + location.length <= bytes.count else {
                    try await body(.unreadable(key: key, error: shorter(pack, object)))
                    continue
                }
                let value = bytes[location.offset..<(location.offset + location.length)]
                guard let text = String(validating: value, as: UTF8.self) else {
                    try await handOver(key, value.count, to: body) { file throws(CloudSyncError) in
                        try file.append(value)
                    }
                    continue
                }
                page.append(KeyValue(key, text))
                pageBytes += value.count
                if page.count == pageSize || pageBytes >= Self.restorePageBytes {
                    try await body(.values(page))
                    page.removeAll(keepingCapacity: true)
                    pageBytes = 0
                }
            }
        }
        if !page.isEmpty { try await body(.values(page)) }
    }

    /// Where blob `id` is: in the index, or else in the header of a pack no readable index names (those headers are
    /// read once, the first time a blob is missing: a damaged index loses no blob its packs still hold).
    func location(of id: String) async throws(CloudSyncError) -> Location? {
        if let location = index[id] { return location }
        if headerIndex == nil { headerIndex = try await locationsFromHeaders() }
        return headerIndex?[id]
    }

    /// The blobs the headers of packs no readable index names say they hold.
    private func locationsFromHeaders() async throws(CloudSyncError) -> [String: Location] {
        let indexed = Set(index.values.lazy.map(\.pack))
        var found: [String: Location] = [:]
        for name in objectNames("data") {
            let pack = String(name.dropFirst((Self.prefix + "data.").count))
            guard !indexed.contains(pack), case .success(let plaintext) = try await openEach([name])[0],
                let blobs = PackHeader.blobs(of: plaintext)
            else { continue }
            for blob in blobs { found[blob.id] = Location(pack: pack, offset: blob.offset, length: blob.length) }
        }
        return found
    }

    /// The error for a blob neither an index nor a pack header places.
    func unlocated(_ id: String, in name: String) -> CloudSyncError {
        CloudSyncError(
            .decode,
            "\(name) in \(provider) names a blob no index or pack header holds; the repository is damaged (run a "
                + "verify job)", provider: provider, key: name)
    }

    /// The error for a pack shorter than a location in it.
    private func shorter(_ pack: String, _ object: String) -> CloudSyncError {
        CloudSyncError(
            .decode, "pack \(pack) in \(provider) is shorter than its index says", provider: provider, key: object)
    }

    /// Writes one value into a new temporary file with `write`, hands it to `body` as a ``RestoredItem/file(key:path:size:)``,
    /// and removes it.
    private func handOver(
        _ key: String, _ size: Int, to body: (RestoredItem) async throws(CloudSyncError) -> Void,
        write: (ScratchFile) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        let file = try ScratchFile()
        defer { file.remove() }
        try await write(file)
        try await body(.file(key: key, path: file.path, size: size))
    }

    /// The bytes of the value a tree entry's id names, when the repository holds it (for a chunked value, its list).
    func storedSize(of entryID: String) -> Int? {
        if let chunked = ChunkedValue.parse(entryID) { return index[chunked.list] == nil ? nil : chunked.size }
        return index[entryID]?.length
    }

    /// The blobs the values of `entryIDs` are made of: each plain value's blob, and each chunked value's list and
    /// chunks (the lists read, each pack once).
    func valueBlobs(of entryIDs: [String], in name: String) async throws(CloudSyncError) -> Set<String> {
        var blobs = Set<String>(minimumCapacity: entryIDs.count)
        var lists: [String] = []
        for id in entryIDs {
            if let chunked = ChunkedValue.parse(id) { lists.append(chunked.list) } else { blobs.insert(id) }
        }
        let unique = Array(Set(lists))
        for (list, bytes) in zip(unique, try await self.blobs(unique, of: name)) {
            blobs.insert(list)
            blobs.formUnion(try chunkIDs(bytes, of: name))
        }
        return blobs
    }

    /// The chunk ids a chunk list blob holds, in order.
    func chunkIDs(_ list: [UInt8], of name: String) throws(CloudSyncError) -> [String] {
        guard let ids = try? JSONSerialization.jsonObject(with: Data(list)) as? [String] else {
            throw CloudSyncError(
                .decode, "a chunk list of \(name) in \(provider) is damaged", provider: provider, key: name)
        }
        return ids
    }

    /// Writes a chunked value's bytes to `file`: its list read, then its chunks in order, keeping only the pack the
    /// last chunk came from (a value's chunks were written one after another, so they share packs in runs).
    func writeChunkedValue(_ chunked: (size: Int, list: String), of name: String, to file: ScratchFile)
        async throws(CloudSyncError)
    {
        let ids = try chunkIDs(try await blobs([chunked.list], of: name)[0], of: name)
        var held: (pack: String, bytes: [UInt8])?
        var written = 0
        for chunk in ids {
            guard let location = try await location(of: chunk) else { throw unlocated(chunk, in: name) }
            if held?.pack != location.pack {
                held = (location.pack, try await readObjects([Self.prefix + "data." + location.pack])[0])
            }
            guard let bytes = held?.bytes, location.offset + location.length <= bytes.count else {
                throw CloudSyncError(
                    .decode, "pack \(location.pack) in \(provider) is shorter than its index says", provider: provider)
            }
            try file.append(bytes[location.offset..<(location.offset + location.length)])
            written += location.length
        }
        guard written == chunked.size else {
            throw CloudSyncError(
                .decode, "a chunked value of \(name) in \(provider) is not the size its tree says", provider: provider,
                key: name)
        }
    }

    /// The ids of the trees snapshot `id` is made of.
    func treeIDs(of id: String) async throws(CloudSyncError) -> [String] {
        let name = Self.prefix + "snapshot." + id
        let object = try snapshotObject(try await readObjects([name])[0], name: name)
        return try await treeIDs(try SnapshotTrees(object, name: name, provider: provider), in: name).trees
    }

    /// The bytes of the blobs `ids` (values or trees), positionally, reading each pack they are in once.
    func blobs(_ ids: [String], of name: String) async throws(CloudSyncError) -> [[UInt8]] {
        var locations: [Location] = []
        for id in ids {
            guard let location = try await location(of: id) else { throw unlocated(id, in: name) }
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

    func snapshotObject(_ plaintext: [UInt8], name: String) throws(CloudSyncError) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any] else {
            throw CloudSyncError(.decode, "\(name) in \(provider) is not a snapshot", provider: provider, key: name)
        }
        return object
    }
}
