import CloudSync
import CloudSyncBackup
import CloudSyncPipeline

/// `backup`: writes one snapshot of a provider's keys (within `keys`) into the encrypted repository kept in another
/// provider; only values the repository lacks are uploaded (``BackupRepository``).
struct BackupJob: JobType {
    struct Configuration: Sendable {
        var from: String
        var to: String
        var codec: String
        var keys: [String]?
        var tags: [String]
        var compressionLevel: Int32
    }

    static let keys = JobCount("keys", "keys in the snapshot")
    static let new = JobCount("new", "values the repository did not hold, uploaded")
    static let unchanged = JobCount("unchanged", "values the repository already held: nothing uploaded")
    static let failed = JobCount(
        "failed",
        "keys left out of the snapshot: their value could not be read or decoded")
    static let unread = JobCount(
        "unread", "values not read at all: the source's version tag was the last snapshot's (counted unchanged too)")
    static let bytesAdded = JobCount("bytesAdded", "bytes of repository objects written")

    let name = "backup"
    let summary = "write one encrypted, deduplicated snapshot of a provider's keys into a backup repository"
    let fields = [
        JobField(
            "from", .providerOrStore, required: true,
            summary: "the provider backed up, or store for the whole store (values read as the store reads them, "
                + "decoded); never written"),
        JobField("to", .provider, required: true, summary: "the provider that keeps the repository"),
        JobField(
            "codec", .codec, required: true,
            summary: "the codec whose key ring seals the repository's keys (made at the first backup)"),
        keysField,
        JobField("tags", .words, summary: "words the snapshot is tagged with"),
        JobField(
            "compressionLevel", .count(1...19), defaultValue: "3",
            summary: "the zstd level the objects this backup writes are compressed at, 1 (fastest) to 19 "
                + "(smallest); what the repository holds already stays as it is"),
    ]
    static let bytesRead = JobCount("bytesRead", "bytes of the source's values read")

    let counts = [keys, new, unchanged, unread, failed, bytesAdded, bytesRead]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let (from, to) = try values.twoProviders("a backup cannot keep its repository in the provider it backs up")
        return Configuration(
            from: from, to: to, codec: values.text("codec") ?? "", keys: values.list("keys"),
            tags: values.list("tags") ?? [], compressionLevel: Int32(values.number("compressionLevel") ?? 3))
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        (configuration.from == "store" ? store : [configuration.from]) + [configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "back up \(configuration.from)\(planKeys(configuration.keys)) into the repository in \(configuration.to), "
            + "sealed by \(configuration.codec)"
            + (configuration.tags.isEmpty ? "" : ", tagged \(configuration.tags.joined(separator: ", "))")
            + (configuration.compressionLevel == 3
                ? "" : ", compressed at zstd level \(configuration.compressionLevel)")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let repository = try await context.backupRepository(
            in: configuration.to, codec: configuration.codec, create: true,
            compressionLevel: configuration.compressionLevel)
        try await repository.withLock(exclusive: false) { lock throws(CloudSyncError) in
            // The last snapshot of the same pipeline and source: keys whose version tag it recorded and that have
            // not moved since are not read again.
            let parent = try await repository.snapshots().last {
                $0.pipeline == context.pipeline && $0.source == configuration.from
            }
            let session = try await repository.startBackup(after: parent)
            // A provider that stores files gives back a file that is not text through its file API, as bytes.
            let files = configuration.from == "store" ? false : try context.store.storesFiles(configuration.from)
            // Keys listed so far, of a total the source counts cheaply when every key is backed up.
            let total =
                configuration.keys == nil && configuration.from != "store"
                ? await context.store.keyCount(of: configuration.from) : nil
            var done = 0
            let finished = try await context.forEachPage(
                of: configuration.from, keys: configuration.keys, toRead: session.keysToRead
            ) { keys, sizes, listed throws(CloudSyncError) in
                try await Self.backUp(
                    keys, sizes: sizes, from: configuration.from, files: files, into: session, in: context,
                    report: &report)
                try await lock.refresh()
                done += listed
                context.progress(done, total.map { max($0, done) })
            }
            guard finished else {
                report.status = .interrupted
                return
            }
            let result = try await session.finish(
                source: configuration.from, pipeline: context.pipeline, tags: configuration.tags,
                time: context.clock.nowMilliseconds(), missed: report[Self.failed], holding: lock)
            report.snapshot = result.snapshotID
            report[Self.keys] = result.keys
            report[Self.new] = result.new
            report[Self.unchanged] = result.unchanged
            report[Self.unread] = result.unread
            report[Self.bytesAdded] = result.bytesAdded
        }
    }
}

extension BackupJob {
    /// The most bytes of values one read asks for, where the listing gives sizes.
    static let readBytes = 4 << 20

    /// Backs up one page of keys to read.
    ///
    /// Where the source stores files, a key its listing says is larger than the session chunks goes through the
    /// file API, cut a window at a time (never read whole), and so does one that does not read as text; the rest are
    /// read as values, in reads of at most ``readBytes`` where the listing gives sizes.
    static func backUp(
        _ keys: [String], sizes: [Int64?]?, from source: String, files: Bool, into session: BackupSession,
        in context: JobContext, report: inout JobReport
    ) async throws(CloudSyncError) {
        var batch: [String] = []
        var batchBytes: Int64 = 0
        var large: [String] = []
        for (index, key) in keys.enumerated() {
            let size = sizes.flatMap { index < $0.count ? $0[index] : nil }
            if files, let size, size > session.chunkingThreshold {
                large.append(key)
                continue
            }
            batch.append(key)
            batchBytes += size ?? 0
            if batchBytes >= readBytes {
                try await addValues(batch, from: source, files: files, into: session, in: context, report: &report)
                batch.removeAll(keepingCapacity: true)
                batchBytes = 0
            }
        }
        try await addValues(batch, from: source, files: files, into: session, in: context, report: &report)
        for key in large { await addFile(key, from: source, into: session, in: context, report: &report) }
    }

    /// Reads `keys` as values and adds them; a value that is not text, from a source that stores files, is added
    /// from its file instead.
    private static func addValues(
        _ keys: [String], from source: String, files: Bool, into session: BackupSession, in context: JobContext,
        report: inout JobReport
    ) async throws(CloudSyncError) {
        guard !keys.isEmpty else { return }
        var items: [KeyValue] = []
        for (key, read) in zip(keys, try await context.readValues(keys, from: source)) {
            switch read {
            case .success(let value?):
                items.append(KeyValue(key, value))
                report.add(value.utf8.count, to: bytesRead)
            case .success(nil): break
            case .failure(let error) where files && (error.code == .decode || error.code == .payloadTooLarge):
                await addFile(key, from: source, into: session, in: context, report: &report)
            case .failure(let error):
                report.record([KeyFailure(key: key, error: error)])
                report.add(1, to: failed)
            }
        }
        let left = try await session.add(items)
        report.record(left)
        report.add(left.count, to: failed)
    }

    /// Backs up `key` of `source` as bytes: its file fetched into a temporary file, then cut and stored window by
    /// window; a failure is the key's, recorded.
    private static func addFile(
        _ key: String, from source: String, into session: BackupSession, in context: JobContext,
        report: inout JobReport
    ) async {
        do throws(CloudSyncError) {
            let file = try ScratchFile()
            defer { file.remove() }
            // Gone since it was listed: like a value removed meanwhile, it is not in the snapshot.
            guard let size = try await context.store.getFile(key, from: source, to: file.path) else { return }
            report.add(Int(size), to: bytesRead)
            try await session.add(key: key, file: file.path)
        } catch {
            report.record([KeyFailure(key: key, error: error)])
            report.add(1, to: failed)
        }
    }
}

extension JobContext {
    /// The backup repository kept in `provider`, its keys opened with the pipeline's codec `codec` (created when
    /// `create` is true and there is none), writing zstd objects at `compressionLevel`.
    func backupRepository(
        in provider: String, codec: String, create: Bool, compressionLevel: Int32? = nil
    ) async throws(CloudSyncError) -> BackupRepository {
        guard let ring = self.codec(codec) else { throw CloudSyncError(.config, "no codec `\(codec)` is declared") }
        return try await BackupRepository.open(
            in: store, provider: provider, codec: ring, create: create,
            compressionLevel: compressionLevel)
    }

    /// Lists `source` (a provider, or `store`) page by page, the keys within `keys`, calling `body` with each page's
    /// keys to read, their sizes where the listing gave them, and how many keys within `keys` the page listed (read
    /// or not); false when the run was interrupted first.
    ///
    /// `toRead`, given a provider's page of keys and the version tags its listing gave, says which to read (the
    /// others are skipped unread); the store as a whole has no tags, so it reads every key.
    func forEachPage(
        of source: String, keys patterns: [String]?,
        toRead: (([String], [String?]?) -> [String])? = nil,
        _ body: ([String], [Int64?]?, Int) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) -> Bool {
        let filter = keyFilter(patterns)
        let pageSize = pageSize(for: [source])
        if source == "store" {
            let keys = try await store.allKeys().keys.filter { filter?($0) ?? true }
            for start in stride(from: 0, to: keys.count, by: pageSize) {
                guard !isInterrupted else { return false }
                let page = Array(keys[start..<min(start + pageSize, keys.count)])
                try await body(page, nil, page.count)
            }
            return true
        }
        var cursor: String?
        repeat {
            guard !isInterrupted else { return false }
            let page = try await store.keyPage(of: source, after: cursor, limit: pageSize)
            cursor = page.nextCursor
            var kept = Array(page.keys.indices)
            if let filter { kept = kept.filter { filter(page.keys[$0]) } }
            var keys = kept.map { page.keys[$0] }
            if let toRead { keys = toRead(keys, page.versions.map { all in kept.map { all[$0] } }) }
            // The sizes of the keys kept, by key: `toRead` keeps some of them, in order.
            let sizes = page.sizes.map { all in
                Dictionary(kept.map { (page.keys[$0], all[$0]) }, uniquingKeysWith: { first, _ in first })
            }
            try await body(keys, sizes.map { sized in keys.map { sized[$0] ?? nil } }, kept.count)
        } while cursor != nil
        return true
    }

    /// The values of `keys` read from `source` (a provider, or the store through its reads), one result each.
    func readValues(_ keys: [String], from source: String) async throws(CloudSyncError)
        -> [Result<String?, CloudSyncError>]
    {
        source == "store" ? try await store.multiGetEach(keys) : try await store.readEach(keys, from: source)
    }
}
