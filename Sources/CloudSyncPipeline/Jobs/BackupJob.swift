import CloudSync
import CloudSyncBackup

/// `backup`: writes one snapshot of a provider's keys (within `keys`) into the encrypted repository kept in another
/// provider; only values the repository lacks are uploaded (``BackupRepository``).
struct BackupJob: JobType {
    struct Configuration: Sendable {
        var from: String
        var to: String
        var codec: String
        var keys: [String]?
        var tags: [String]
    }

    static let keys = JobCount("keys", "keys in the snapshot")
    static let new = JobCount("new", "values the repository did not hold, uploaded")
    static let unchanged = JobCount("unchanged", "values the repository already held: nothing uploaded")
    static let failed = JobCount("failed", "keys whose value could not be read or decoded (left out of the snapshot)")
    static let bytesAdded = JobCount("bytesAdded", "bytes of repository objects written")

    let name = "backup"
    let summary = "write one encrypted, deduplicated snapshot of a provider's keys into a backup repository"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider backed up; never written"),
        JobField("to", .provider, required: true, summary: "the provider that keeps the repository"),
        JobField(
            "codec", .codec, required: true,
            summary: "the codec whose key ring seals the repository's keys (made at the first backup)"),
        keysField,
        JobField("tags", .words, summary: "words the snapshot is tagged with"),
    ]
    let counts = [keys, new, unchanged, failed, bytesAdded]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let from = values.text("from") ?? ""
        let to = values.text("to") ?? ""
        guard from != to else {
            throw JobConfigurationError(field: "to", "a backup cannot keep its repository in the provider it backs up")
        }
        return Configuration(
            from: from, to: to, codec: values.text("codec") ?? "", keys: values.list("keys"),
            tags: values.list("tags") ?? [])
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from, configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "back up \(configuration.from)\(planKeys(configuration.keys)) into the repository in \(configuration.to), "
            + "sealed by \(configuration.codec)"
            + (configuration.tags.isEmpty ? "" : ", tagged \(configuration.tags.joined(separator: ", "))")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let store = context.store
        let repository = try await context.backupRepository(
            in: configuration.to, codec: configuration.codec, create: true)
        let session = repository.startBackup()
        let filter = keyFilter(configuration.keys)
        let pageSize = context.pageSize(for: [configuration.from])
        var cursor: String?
        var done = 0
        repeat {
            guard !context.isInterrupted else {
                report.status = .interrupted
                return
            }
            let page = try await store.keyPage(of: configuration.from, after: cursor, limit: pageSize)
            cursor = page.nextCursor
            let keys = filter.map { page.keys.filter($0) } ?? page.keys
            var items: [KeyValue] = []
            for (key, read) in zip(keys, try await store.readEach(keys, from: configuration.from)) {
                switch read {
                case .success(let value?): items.append(KeyValue(key, value))
                case .success(nil): break
                case .failure(let error):
                    report.record([KeyFailure(key: key, error: error)])
                    report.add(1, to: Self.failed)
                }
            }
            try await session.add(items)
            done += page.keys.count
            context.progress(done, nil)
        } while cursor != nil
        let result = try await session.finish(
            source: configuration.from, pipeline: context.pipeline, tags: configuration.tags,
            time: context.clock.nowMilliseconds())
        report.snapshot = result.snapshotID
        report[Self.keys] = result.keys
        report[Self.new] = result.new
        report[Self.unchanged] = result.unchanged
        report[Self.bytesAdded] = result.bytesAdded
    }
}

extension JobContext {
    /// The backup repository kept in `provider`, its keys opened with the pipeline's codec `codec` (created when
    /// `create` is true and there is none).
    func backupRepository(in provider: String, codec: String, create: Bool) async throws(CloudSyncError)
        -> BackupRepository
    {
        guard let ring = self.codec(codec) else { throw CloudSyncError(.config, "no codec `\(codec)` is declared") }
        return try await BackupRepository.open(in: store, provider: provider, codec: ring, create: create)
    }
}
