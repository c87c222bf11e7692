import CloudSync

/// Gathers blobs (values' bytes, trees) into packs of about ``BackupRepository/packBytes``, sealing and writing each
/// as it fills, and writes the index of the packs it wrote when asked.
///
/// Used by a backup (blobs the repository lacks) and by prune (the blobs still needed from packs it rewrites).
final class PackWriter {
    let repository: BackupRepository
    private var pack: [UInt8] = []
    private var packID = BackupRepository.randomID()
    /// The pack under way's blobs, by id.
    private(set) var pending: [String: BackupRepository.Location] = [:]
    /// Every pack written: id -> its blobs' (id, offset, length).
    private(set) var written: [String: [(id: String, offset: Int, length: Int)]] = [:]
    /// Bytes of objects written, as stored.
    private(set) var bytesWritten = 0

    init(_ repository: BackupRepository) { self.repository = repository }

    /// What one blob's row in the pack header takes at most (`["<32 hex digits>",<offset>,<length>],`), and the
    /// header's brackets and trailer: a pack's blobs and header together stay within ``BackupRepository/packBytes``.
    static let headerBytesPerBlob = 64
    static let trailerBytes = 10

    /// The largest blob a pack of `packBytes` holds, with its header.
    static func room(inPackOf packBytes: Int) -> Int { max(1, packBytes - headerBytesPerBlob - trailerBytes) }

    /// Whether the pack under way holds `id` (written packs' blobs are in the repository's index).
    func holds(_ id: String) -> Bool { pending[id] != nil }

    /// Appends a blob to the pack under way, first writing the pack when the blob would take it over
    /// ``BackupRepository/packBytes``; a blob larger than that alone is `ERR_PAYLOAD_TOO_LARGE`, naming `key`.
    func add(_ id: String, _ bytes: some Collection<UInt8>, key: String? = nil) async throws(CloudSyncError) {
        guard bytes.count <= Self.room(inPackOf: repository.packBytes) else {
            throw CloudSyncError(
                .payloadTooLarge,
                "a value of \(bytes.count) bytes does not fit in a pack of the backup repository in "
                    + "\(repository.provider), whose values hold at most \(repository.packBytes) bytes sealed; keep the "
                    + "repository in a provider that takes larger values", provider: repository.provider, key: key)
        }
        let header = (pending.count + 1) * Self.headerBytesPerBlob + Self.trailerBytes
        if pack.count + bytes.count + header > repository.packBytes { try await flush() }
        pending[id] = BackupRepository.Location(pack: packID, offset: pack.count, length: bytes.count)
        pack += bytes
    }

    /// Seals and writes the pack under way, if it holds anything, its header after its blobs, and records its blobs in
    /// the repository's index.
    func flush() async throws(CloudSyncError) {
        guard !pending.isEmpty else { return }
        let blobs = pending.map { ($0.key, $0.value.offset, $0.value.length) }
        pack += PackHeader.encoded(blobs)
        let stored = try await repository.writeObjects([(BackupRepository.prefix + "data." + packID, pack)])
        bytesWritten += stored
        repository.packSizes[packID] = stored
        written[packID] = blobs
        repository.record(pending)
        pack = []
        pending = [:]
        packID = BackupRepository.randomID()
    }

    /// Writes the last pack, then an index of every pack written (several objects when it is long); the names of
    /// the index objects.
    @discardableResult
    func finish() async throws(CloudSyncError) -> [String] {
        try await flush()
        let names = try await repository.writeIndex(written)
        bytesWritten += names.bytes
        return names.names
    }
}

extension BackupRepository {
    /// The entries of `index` by pack, as ``writeIndex(_:)`` takes them.
    static func entriesByPack(_ index: [String: Location]) -> [String: [(id: String, offset: Int, length: Int)]] {
        var byPack: [String: [(id: String, offset: Int, length: Int)]] = [:]
        for (id, location) in index {
            byPack[location.pack, default: []].append((id, location.offset, location.length))
        }
        return byPack
    }

    /// Writes `packs` (pack id -> its blobs) as index objects of at most ``indexEntriesPerObject`` entries (10,000,
    /// or fewer where the provider's value limit needs): their names and stored bytes.
    ///
    /// From format 2 on each object also gives, under `sizes`, the stored bytes of the packs it names, since a compressed
    /// pack's size no longer follows from its blobs' and prune reports what it frees.
    func writeIndex(_ packs: [String: [(id: String, offset: Int, length: Int)]]) async throws(CloudSyncError)
        -> (names: [String], bytes: Int)
    {
        var objects: [(name: String, plaintext: [UInt8])] = []
        // The packs of the object under way, each with its run of blobs, in pack order.
        var current: [(pack: String, blobs: ArraySlice<(id: String, offset: Int, length: Int)>)] = []
        var count = 0
        func close() {
            guard !current.isEmpty else { return }
            objects.append((Self.prefix + "index." + Self.randomID(), indexObject(current)))
            current = []
            count = 0
        }
        for pack in packs.keys.sorted() {
            let blobs = packs[pack]!
            var start = blobs.startIndex
            while start < blobs.endIndex {
                let end = min(blobs.endIndex, start + (indexEntriesPerObject - count))
                current.append((pack, blobs[start..<end]))
                count += end - start
                start = end
                if count >= indexEntriesPerObject { close() }
            }
        }
        close()
        guard !objects.isEmpty else { return ([], 0) }
        return (objects.map(\.name), try await writeObjects(objects))
    }

    /// One index object's JSON: each pack's run of blobs under its id (each pack once: its runs in other objects
    /// are joined by readers, who take the union), and from format 2 on the stored sizes of the packs it names under
    /// `sizes`.
    private func indexObject(_ runs: [(pack: String, blobs: ArraySlice<(id: String, offset: Int, length: Int)>)])
        -> [UInt8]
    {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        for (index, run) in runs.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONText.appendString(run.pack, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            BlobRowsJSON.append(run.blobs, to: &bytes)
        }
        if format >= 2 {
            bytes += Array(",\"\(Self.indexSizesMember)\":{".utf8)
            var first = true
            for run in runs {
                guard let size = packSizes[run.pack] else { continue }
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                JSONText.appendString(run.pack, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                BlobRowsJSON.appendNumber(size, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
