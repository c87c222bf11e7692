import CloudSync

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
        let items = try ExportFile.read(configuration.path.value, codecs: Array(context.compiled.codecs.values))
        let store = context.store
        let target = configuration.to
        let pageSize = context.pageSize(for: [target])
        for start in stride(from: 0, to: items.count, by: pageSize) {
            var batch = Array(items[start..<min(start + pageSize, items.count)])
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
            context.progress(min(start + pageSize, items.count), items.count)
        }
    }
}
