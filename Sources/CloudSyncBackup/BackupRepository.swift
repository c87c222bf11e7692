import CloudSync
import CloudSyncSodium
import Foundation

/// A content-addressed, encrypted, versioned repository of key sets, kept as values of one provider.
///
/// Objects (every store key starts `cloudsync-repo.`; names carry random or keyed ids, never a key set's names):
/// - `config`: the format version and the repository's keys, sealed by the pipeline's codec (``RepositoryKeys``).
/// - `data.<pack id>`: a pack, many values' bytes one after another, sealed with the data key.
/// - `index.<id>`: which pack, offset and length hold each value id, sealed.
/// - `snapshot.<id>`: one backup: its time, source, tags and every key with its value's id, sealed.
///
/// Equal values share an id (a keyed hash of the bytes), so a value is stored once across keys and snapshots, and a
/// second backup uploads only the values the index lacks. A backup writes packs first, then its index, then its
/// snapshot: killed at any point, it leaves no snapshot naming data that is not there.
public final class BackupRepository {
    /// The format this code creates repositories in.
    ///
    /// It reads every older one and refuses a newer one. Format 1 sealed objects as they were; format 2 compressed
    /// each with raw DEFLATE first, and marked it so; format 3 makes each a zstd frame instead (level 3), or leaves
    /// it as it is when that is not smaller. Opening an older repository with `create` (as a backup does) makes it
    /// format 3: what it holds stays as it is and is read as before, and what is written from then on is zstd.
    public static let formatVersion = 3
    /// The format of this repository (format 1 only while it is opened for reading).
    public let format: Int
    /// Every object's store key starts with this.
    public static let prefix = "cloudsync-repo."
    static let configName = prefix + "config"

    /// Where a value's bytes are: which pack, and where in it.
    struct Location: Sendable, Equatable {
        var pack: String
        var offset: Int
        var length: Int
    }

    let store: CloudStore
    /// The provider the repository lives in.
    public let provider: String
    let keys: RepositoryKeys
    /// Packs hold at most this many bytes of blobs: the `packBytes` asked for (at most
    /// ``RepositoryKeys/maxPackBytes``), or less where the provider's value limit needs (on a provider that stores
    /// only text a pack is base64 of its sealed bytes, a third larger).
    let packBytes: Int
    /// Whether packs and index objects are stored as files, in the byte form (the provider stores files as they
    /// are), rather than as text values.
    let objectsAsFiles: Bool
    /// Entries an index object holds at most, so it fits the provider's value limit too.
    let indexEntriesPerObject: Int
    /// Tree ids a snapshot object names at most, and a tree list holds.
    ///
    /// 8,192, or fewer where the provider takes small values (a snapshot object is a value even where packs are
    /// files). A snapshot of more trees names tree lists instead (`treeLists`, `treeLevels`). Tests lower it.
    var treeIDsPerObject: Int
    /// Cuts values too large to be one blob, each chunk fitting a pack.
    let chunker: ValueChunker
    /// Every value id the repository holds, and where.
    var index: [String: Location]
    /// The stored bytes of packs, where known: from format 2 indexes, and for packs this process wrote.
    var packSizes: [String: Int] = [:]
    /// The member of a format 2 index object that gives its packs' stored sizes (pack ids are hexadecimal, so it
    /// cannot be one).
    static let indexSizesMember = "sizes"
    /// Index objects that did not open or parse: the repository opens without them (a restore finds their packs'
    /// blobs through the packs' headers), verify names them, and prune refuses to run until `repair index` replaces
    /// them.
    public private(set) var damagedIndexes: [RepositoryProblem] = []
    /// Where blobs are according to the headers of packs no readable index names, read once when a blob is not in
    /// the index (nil until then).
    var headerIndex: [String: Location]?
    /// Every object's name, listed once when the repository opens and kept up to date with what it writes.
    private var names: Set<String> = []
    /// Bytes of repository objects read since it was opened, as stored (sealed, compressed): what a job's report
    /// gives as its `bytesRead` from the repository.
    public private(set) var bytesRead = 0
    /// Bytes of repository objects written since it was opened, as stored: locks and snapshots as well as packs
    /// and indexes.
    public private(set) var bytesWritten = 0

    /// Adds `bytes` read outside ``openEach(_:)`` to ``bytesRead``.
    func countRead(_ bytes: Int) { bytesRead += bytes }
    /// When objects were last written by the provider's clock, where its listing tells (milliseconds since the
    /// epoch), as of the last listing: lock ages and the age of packs no index names are judged by it.
    private(set) var objectTimes: [String: Int64] = [:]

    private init(
        store: CloudStore, provider: String, format: Int, keys: RepositoryKeys, packBytes: Int,
        index: [String: Location]
    ) throws(CloudSyncError) {
        self.store = store
        self.format = format
        self.provider = provider
        self.keys = keys
        objectsAsFiles = try store.storesFiles(provider)
        let maxValueBytes = try store.capabilities(of: provider).maxValueBytes
        let limit = (objectsAsFiles ? nil : maxValueBytes.map(Self.plaintextFitting)) ?? Int.max
        self.packBytes = max(1, min(packBytes, limit, RepositoryKeys.maxPackBytes))
        // An entry is at most about 80 bytes of JSON (a 32-digit id, a pack's offset and length).
        self.indexEntriesPerObject = max(1, min(10_000, limit / 80))
        // An id is 34 bytes of JSON; half the value limit leaves room for the snapshot's other fields.
        self.treeIDsPerObject = max(2, min(8_192, (maxValueBytes.map(Self.plaintextFitting) ?? Int.max) / 80))
        self.chunker = ValueChunker(key: keys.id, largest: PackWriter.room(inPackOf: self.packBytes))
        self.index = index
    }

    /// The most plaintext bytes whose sealed object fits in `limit` stored bytes (less 1 KB for a codec the
    /// provider may have of its own), however little they compress: an object compression does not shrink is sealed
    /// as it is, and the margin keeps room for the mark.
    static func plaintextFitting(_ limit: Int) -> Int {
        let sealed = (limit - 1024) / 4 * 3 - 40
        return max(1, sealed - sealed / 3_000 - 8)
    }

    /// Opens the repository in `provider`, creating it when `create` is true and there is none.
    ///
    /// A writer (`create` true) also rewraps the repository's keys under the codec's current key when the codec was
    /// re-keyed since they were wrapped: one small object, so rotating the codec's key never re-uploads data.
    ///
    /// `codec` seals the repository's keys (its key ring); a ring none of whose keys opens them is `ERR_DECODE`
    /// naming the repository, and a repository of a newer format than ``formatVersion`` is `ERR_CONFIG`. An index
    /// object that does not open is kept aside in ``damagedIndexes``, not thrown: damage stays where it is.
    /// `compressionLevel` is the zstd level objects are written at (default 3); a reader never writes.
    public static func open(
        in store: CloudStore, provider: String, codec: any ValueCodec, create: Bool, packBytes: Int = 4 << 20,
        compressionLevel: Int32? = nil
    ) async throws(CloudSyncError) -> BackupRepository {
        try await open(
            in: store, provider: provider, codec: codec, create: create, packBytes: packBytes,
            newFormat: formatVersion, compressionLevel: compressionLevel)
    }

    /// ``open(in:provider:codec:create:packBytes:compressionLevel:)``, creating a repository of `newFormat` when there is
    /// none (tests make format 1 ones, and write to them through the repository this returns).
    static func open(
        in store: CloudStore, provider: String, codec: any ValueCodec, create: Bool, packBytes: Int = 4 << 20,
        newFormat: Int, compressionLevel: Int32? = nil
    ) async throws(CloudSyncError) -> BackupRepository {
        let config = try await store.read([configName], from: provider)[0]
        var keys: RepositoryKeys
        var format: Int
        if let config {
            guard let object = try? JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any],
                let stored = object["format"] as? Int, stored >= 1, let wrapped = object["keys"] as? String
            else {
                throw CloudSyncError(
                    .decode, "\(configName) in \(provider) is not a backup repository's config", provider: provider,
                    key: configName)
            }
            format = stored
            guard format <= formatVersion else {
                throw CloudSyncError(
                    .config,
                    "the backup repository in \(provider) has format \(format), newer than this cloudsync reads "
                        + "(\(formatVersion)); use a newer cloudsync", provider: provider)
            }
            keys = try RepositoryKeys.unwrapped(
                wrapped, with: codec, as: configName, repository: provider, format: format)
            // The codec was re-keyed since: wrap the keys under its current key, so the old one can leave the ring.
            // An older format is upgraded the same way: what is written from now on is compressed as the current
            // format compresses. One small object is rewritten; no data is.
            if create && (!codec.isCurrent(wrapped) || format < formatVersion) {
                if format < formatVersion {
                    format = formatVersion
                    keys = keys.compressing(RepositoryKeys.compression(forFormat: format))
                }
                try await writeConfig(keys, format: format, codec: codec, in: store, provider: provider)
            }
        } else {
            guard create else {
                throw CloudSyncError(
                    .config, "\(provider) holds no backup repository; a backup job creates one", provider: provider)
            }
            format = newFormat
            keys = RepositoryKeys.random(format: format)
            try await writeConfig(keys, format: format, codec: codec, in: store, provider: provider)
        }
        if let compressionLevel, case .zstd = keys.compression {
            keys = keys.compressing(.zstd(level: compressionLevel))
        }
        let repository = try BackupRepository(
            store: store, provider: provider, format: format, keys: keys, packBytes: packBytes, index: [:])
        try await repository.listObjects()
        try await repository.loadIndex()
        return repository
    }

    /// Writes the config: the format version and `keys` wrapped by `codec`'s current key.
    private static func writeConfig(
        _ keys: RepositoryKeys, format: Int, codec: any ValueCodec, in store: CloudStore, provider: String
    ) async throws(CloudSyncError) {
        let object: [String: Any] = ["format": format, "keys": try keys.wrapped(with: codec, as: configName)]
        let text = String(decoding: json(object), as: UTF8.self)
        try await store.write([KeyValue(configName, text)], to: provider)[0].get()
    }

    /// Lists the provider, page by page, keeping the repository's object names.
    func listObjects() async throws(CloudSyncError) {
        names = []
        objectTimes = [:]
        var cursor: String?
        repeat {
            let page = try await store.keyPage(of: provider, after: cursor, limit: 1000)
            for (position, key) in page.keys.enumerated() where key.hasPrefix(Self.prefix) {
                names.insert(key)
                if let modified = page.modified, position < modified.count, let time = modified[position] {
                    objectTimes[key] = time
                }
            }
            cursor = page.nextCursor
        } while cursor != nil
    }

    /// Drops `removed` from the object names.
    func forgetNames(_ removed: [String]) {
        names.subtract(removed)
    }

    /// Every object name under `kind` (`data`, `index`, `snapshot`), in bytewise order.
    func objectNames(_ kind: String) -> [String] {
        let start = Self.prefix + kind + "."
        return names.filter { $0.hasPrefix(start) }.sorted { StoreKey.bytesPrecede($0, $1) }
    }

    /// The decrypted objects `names`, positionally; a missing one is `ERR_DECODE` naming it.
    func readObjects(_ names: [String]) async throws(CloudSyncError) -> [[UInt8]] {
        var opened: [[UInt8]] = []
        opened.reserveCapacity(names.count)
        for object in try await openEach(names) { opened.append(try object.get()) }
        return opened
    }

    /// Each object of `names` decrypted, or why it could not be: read errors, and `ERR_DECODE` naming a missing or
    /// damaged one.
    ///
    /// Packs and index objects are read through the provider's file API where it stores files (either form reads
    /// so: a text object's bytes are its text); every object is read no further than its kind's bound.
    func openEach(_ names: [String]) async throws(CloudSyncError) -> [Result<[UInt8], CloudSyncError>] {
        guard !names.isEmpty else { return [] }
        var results: [Result<[UInt8], CloudSyncError>?] = Array(repeating: nil, count: names.count)
        var texts: [Int] = []
        var files: [Int] = []
        for (position, name) in names.enumerated() {
            if objectsAsFiles && Self.isFileObject(name) { files.append(position) } else { texts.append(position) }
        }
        // Several at a time: a repository opens by reading every index object, one request (or two) each.
        for start in stride(from: 0, to: files.count, by: Self.concurrentFileReads) {
            let batch = files[start..<min(start + Self.concurrentFileReads, files.count)]
            await withTaskGroup(of: (Int, Result<(opened: [UInt8], stored: Int), CloudSyncError>).self) { group in
                for position in batch {
                    let name = names[position]
                    group.addTask { [store, provider, keys] in
                        (position, await Self.openFile(name, store: store, provider: provider, keys: keys))
                    }
                }
                for await (position, result) in group {
                    results[position] = result.map(\.opened)
                    if case .success(let read) = result { bytesRead += read.stored }
                }
            }
        }
        let read = try await store.readEach(texts.map { names[$0] }, from: provider)
        for (position, read) in zip(texts, read) {
            let name = names[position]
            results[position] = Result { () throws(CloudSyncError) -> [UInt8] in
                guard let stored = try read.get() else { throw Self.missing(name, provider) }
                bytesRead += stored.utf8.count
                return try keys.open(
                    stored, name: name, repository: provider, maxBytes: RepositoryKeys.maxBytes(of: name))
            }
        }
        return results.map { $0! }
    }

    /// How many objects stored as files ``openEach(_:)`` reads at once.
    static let concurrentFileReads = 8

    /// The object `name` read through the provider's file API and opened, no further than its kind's bound, and the
    /// bytes it took as stored.
    private static func openFile(_ name: String, store: CloudStore, provider: String, keys: RepositoryKeys) async
        -> Result<(opened: [UInt8], stored: Int), CloudSyncError>
    {
        let bound = RepositoryKeys.maxBytes(of: name)
        do throws(CloudSyncError) {
            // The byte form is the sealed bytes and 2; a text object from before is a third larger.
            guard let stored = try await store.getBytes(name, from: provider, maxBytes: bound / 3 * 4 + 4096) else {
                return .failure(missing(name, provider))
            }
            return .success(
                (try keys.open(bytes: stored, name: name, repository: provider, maxBytes: bound), stored.count))
        } catch  where error.code == .payloadTooLarge {
            return .failure(
                CloudSyncError(
                    .decode,
                    "object \(name) of the backup repository in \(provider) is larger than any writer makes one of its "
                        + "kind (\(error.message)); it is damaged and was not read: run a verify job",
                    provider: provider,
                    key: name))
        } catch {
            return .failure(error)
        }
    }

    /// Whether objects named `name` are stored as files where the provider takes them: packs and index objects.
    static func isFileObject(_ name: String) -> Bool {
        name.hasPrefix(prefix + "data.") || name.hasPrefix(prefix + "index.")
    }

    private static func missing(_ name: String, _ provider: String) -> CloudSyncError {
        CloudSyncError(
            .decode, "object \(name) of the backup repository in \(provider) is missing", provider: provider, key: name)
    }

    /// Seals and writes objects, failing on the first that does not land; the bytes they take as stored.
    ///
    /// Packs and index objects go to the provider's file API in the byte form where it stores files; the rest (and
    /// everything on a provider that stores only text) as text values.
    func writeObjects(_ objects: [(name: String, plaintext: [UInt8])]) async throws(CloudSyncError) -> Int {
        var items: [KeyValue] = []
        var stored = 0
        for object in objects {
            if objectsAsFiles && Self.isFileObject(object.name) {
                let (prefix, sealed) = try keys.sealBytes(object.plaintext, name: object.name)
                let file = try ScratchFile()
                defer { file.remove() }
                try file.append(prefix[...])
                try file.append(sealed[...])
                try await store.putFile(object.name, from: file.path, to: provider)
                names.insert(object.name)
                stored += prefix.count + sealed.count
            } else {
                items.append(KeyValue(object.name, try keys.seal(object.plaintext, name: object.name)))
            }
        }
        for result in try await store.write(items, to: provider) { try result.get() }
        names.formUnion(items.map(\.key))
        let written = items.reduce(stored) { $0 + $1.value.utf8.count }
        bytesWritten += written
        return written
    }

    /// Reads every index object; one that does not open or parse is kept aside in ``damagedIndexes`` (its packs are
    /// still read through their headers), and a read error throws.
    private func loadIndex() async throws(CloudSyncError) {
        let names = objectNames("index")
        let objects = try await openEach(names)
        // Room for every entry at once (an entry is at least 40 bytes of JSON): a million-entry dictionary grown by
        // doubling would be rehashed twenty times.
        index.reserveCapacity(objects.reduce(0) { $0 + ((try? $1.get())?.count ?? 0) } / 40)
        for (name, opened) in zip(names, objects) {
            do throws(CloudSyncError) {
                let plaintext = try opened.get()
                guard let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any] else {
                    throw CloudSyncError(
                        .decode, "index \(name) of the backup repository in \(provider) is not an index",
                        provider: provider, key: name)
                }
                for (pack, member) in object {
                    if pack == Self.indexSizesMember {
                        for case (let sized, let bytes as Int) in member as? [String: Any] ?? [:] {
                            packSizes[sized] = bytes
                        }
                        continue
                    }
                    for case let entry as [Any] in member as? [Any] ?? [] {
                        guard entry.count == 3, let id = entry[0] as? String, let offset = entry[1] as? Int,
                            let length = entry[2] as? Int
                        else { continue }
                        index[id] = Location(pack: pack, offset: offset, length: length)
                    }
                }
            } catch {
                guard error.code == .decode else { throw error }
                damagedIndexes.append(RepositoryProblem(object: name, message: error.message, code: error.code))
            }
        }
    }

    func record(_ locations: [String: Location]) { index.merge(locations) { old, _ in old } }

    /// A random 128-bit id in hexadecimal, for packs, indexes and snapshots.
    static func randomID() -> String { Hex.encode(SecureRandom.bytes(count: 16)) }

    /// JSON bytes of `object`, keys sorted.
    static func json(_ object: Any) -> [UInt8] {
        [UInt8]((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }

    /// ``json(_:)`` of rows of texts (a tree's entries), byte for byte, written directly.
    ///
    /// A backup writes a tree for every run of keys, unchanged ones included (their ids are their bytes' hashes), and
    /// `JSONSerialization` bridged each text to an object and back: 38% of a second backup's CPU. The bytes must stay
    /// Foundation's, or every tree of the next backup would get a new id; a test compares the two on every character
    /// that is escaped.
    static func json(rows: [[String]]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(rows.reduce(2) { total, row in row.reduce(total + 3) { $0 + $1.utf8.count + 3 } })
        bytes.append(UInt8(ascii: "["))
        for (index, row) in rows.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "["))
            for (column, text) in row.enumerated() {
                if column > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONText.appendString(text, to: &bytes, style: .foundation)
            }
            bytes.append(UInt8(ascii: "]"))
        }
        bytes.append(UInt8(ascii: "]"))
        return bytes
    }
}
