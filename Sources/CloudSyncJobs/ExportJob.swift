import CloudSync
import CloudSyncPipeline

/// `export`: writes the selected keys and their plaintext values to a file, optionally encrypted.
struct ExportJob: JobType {
    struct Configuration: Sendable {
        /// A provider id, or `store`.
        var from: String
        var path: Interpolated
        var keys: [String]?
        var codec: String?
    }

    static let items = JobCount("items", "keys written to the file")
    static let failed = JobCount("failed", "keys whose value could not be read or decoded (the rest still export)")

    let name = "export"
    let summary = "write keys and their plaintext values to a JSON file, optionally encrypted"
    let fields = [
        JobField("from", .providerOrStore, required: true, summary: "a provider id, or store for the whole store"),
        JobField("path", .path, required: true, summary: "the export file"),
        keysField,
        JobField("codec", .codec, summary: "encrypt the whole file with this codec's current key"),
    ]
    let counts = [items, failed]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        Configuration(
            from: values.text("from") ?? "store", path: values.path("path") ?? Interpolated(value: "", written: ""),
            keys: values.list("keys"), codec: values.text("codec"))
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        configuration.from == "store" ? store : [configuration.from]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "write \(configuration.from)\(planKeys(configuration.keys)) to \(paths.display(configuration.path))"
            + (configuration.codec.map { ", encrypted with \($0)" } ?? "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        report.file = configuration.path.display
        // Written as the values are read, a page at a time; a dry run reads and counts them and writes nothing.
        let writer =
            context.isDryRun
            ? nil
            : try ExportFileWriter(
                path: configuration.path.value, pipeline: context.pipeline, source: configuration.from,
                codec: configuration.codec.flatMap { id in context.codec(id).map { (id, $0) } })
        let (items, failed) = try await exportItems(
            from: configuration.from, filter: keyFilter(configuration.keys), in: context
        ) { page throws(CloudSyncError) in try writer?.add(page) }
        try writer?.finish()
        report.record(failed)
        report[Self.items] = items
        report[Self.failed] = failed.count
    }

    /// Reads every selected key's plaintext value, a page at a time in bytewise key order, from one provider (decoded
    /// with its codec) or the store, and hands each page to `write`; returns how many were read and the keys whose
    /// value could not be read or decoded (each named, as `verify` names them; the rest still export).
    private func exportItems(
        from source: String, filter: (@Sendable (String) -> Bool)?, in context: JobContext,
        write: ([KeyValue]) throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) -> (Int, [KeyFailure]) {
        let store = context.store
        var keys =
            try await (source == "store" ? store.allKeys().keys : store.listKeys(of: source)).filter {
                filter?($0) ?? true
            }
        keys.sort(by: StoreKey.bytesPrecede)
        let pageSize = context.pageSize(for: [source])
        var count = 0
        var failed: [KeyFailure] = []
        var page: [KeyValue] = []
        page.reserveCapacity(pageSize)
        for start in stride(from: 0, to: keys.count, by: pageSize) {
            let batch = Array(keys[start..<min(start + pageSize, keys.count)])
            let values =
                source == "store" ? try await store.multiGetEach(batch) : try await store.readEach(batch, from: source)
            var unread: [String] = []
            page.removeAll(keepingCapacity: true)
            for (key, value) in zip(batch, values) {
                switch value {
                case .success(let value?): page.append(KeyValue(key, value))
                case .success(nil): unread.append(key)
                case .failure(let error): failed.append(KeyFailure(key: key, error: error))
                }
            }
            try write(page)
            count += page.count
            // The store reads a key one provider lacks and another holds undecodable as missing; a listed key is
            // held somewhere, so find out which copy could not be read.
            if source == "store" && !unread.isEmpty {
                failed += try await unreadableCopies(of: unread, in: context)
            }
            context.progress(min(start + pageSize, keys.count), keys.count)
        }
        return (count, failed.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
    }

    /// The first copy of each of `keys` that a store provider holds but cannot read or decode.
    private func unreadableCopies(of keys: [String], in context: JobContext) async throws(CloudSyncError)
        -> [KeyFailure]
    {
        var failures = [CloudSyncError?](repeating: nil, count: keys.count)
        for provider in context.storeProviders {
            for (index, result) in try await context.store.readEach(keys, from: provider).enumerated() {
                if case .failure(let error) = result, failures[index] == nil { failures[index] = error }
            }
        }
        return zip(keys, failures).compactMap { key, error in error.map { KeyFailure(key: key, error: $0) } }
    }
}
