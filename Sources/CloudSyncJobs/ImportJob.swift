import CloudSync
import CloudSyncPipeline

/// `import`: writes the items of an export file to one provider or the store.
struct ImportJob: JobType {
    struct Configuration: Sendable {
        var path: Interpolated
        /// A provider id, or `store`.
        var to: String
        var overwrite: Overwrite
    }

    static let imported = JobCount("imported", "keys written (stored, or queued for some provider)")
    static let skipped = JobCount(
        "skipped", "keys not written: already there (`ifMissing`) or already holding the same value (`ifDifferent`)")
    static let failed = JobCount("failed", "keys that could not be written")
    static let queued = JobCount("queued", "keys some provider's copy of waits in the outbox")

    let name = "import"
    let summary = "write the keys of an export file into one provider or the store"
    let fields = [
        JobField("path", .path, required: true, summary: "the export file to read"),
        JobField("to", .providerOrStore, required: true, summary: "a provider id, or store for the whole store"),
        overwriteField,
    ]
    let counts = [imported, skipped, failed, queued]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        Configuration(
            path: values.path("path") ?? Interpolated(value: "", written: ""), to: values.text("to") ?? "store",
            overwrite: values.choice("overwrite", default: Overwrite.always))
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        configuration.to == "store" ? store : [configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "read \(paths.display(configuration.path)) into \(configuration.to), overwrite \(configuration.overwrite.rawValue)"
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        report.file = configuration.path.display
        // The whole file is read once before anything is written, so a damaged one writes nothing; then again,
        // a page at a time, to write it.
        let codecs = Array(context.compiled.codecs.values)
        let total = try ExportFileReader.check(configuration.path.value, codecs: codecs)
        var reader = try ExportFileReader(configuration.path.value, codecs: codecs)
        let store = context.store
        let target = configuration.to
        let pageSize = context.pageSize(for: [target])
        var done = 0
        while true {
            var batch: [KeyValue] = []
            while batch.count < pageSize, let item = try reader.next() { batch.append(item) }
            guard !batch.isEmpty else { break }
            done += batch.count
            if configuration.overwrite != .always {
                let keys = batch.map(\.key)
                let existing =
                    target == "store" ? try await store.multiGet(keys) : try await store.read(keys, from: target)
                let before = batch.count
                batch = zip(batch, existing).compactMap { item, value in
                    configuration.overwrite.writes(item.value, over: value) ? item : nil
                }
                report.add(before - batch.count, to: Self.skipped)
            }
            let results =
                target == "store"
                ? try await store.multiSet(batch)
                : (try await store.write(batch, to: target)).map { $0.map { WriteReceipt() } }
            for (item, result) in zip(batch, results) {
                switch result {
                case .success(let receipt):
                    report.add(1, to: Self.imported)
                    if !receipt.queued.isEmpty { report.add(1, to: Self.queued) }
                case .failure(let error):
                    report.record([KeyFailure(key: item.key, error: error)])
                    report.add(1, to: Self.failed)
                }
            }
            context.progress(done, total)
        }
    }
}
