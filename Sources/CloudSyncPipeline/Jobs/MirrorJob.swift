import CloudSync

/// `mirror`: one-way; afterwards `to` holds exactly `from`'s keys (within `keys`) with `from`'s values, and `from`
/// is never written.
///
/// Both listings are walked together in key order, a page at a time. Each page reads the values of both sides and
/// writes only what differs, so an unchanged value costs a read and no write; an edit made at `to` behind the job's
/// back is seen and undone. Keys only `to` holds are collected in a temporary table and removed once their count is
/// known to be within `maxDeletes`.
struct MirrorJob: JobType {
    struct Configuration: Sendable {
        var from: String
        var to: String
        var keys: [String]?
        var deletes: Bool
        var maxDeletes: DeleteLimit
    }

    static let copied = JobCount("copied", "keys `to` lacked, written")
    static let updated = JobCount("updated", "keys `to` held with another value, rewritten")
    static let deleted = JobCount("deleted", "keys `from` no longer has, removed from `to`")
    static let unchanged = JobCount("unchanged", "keys `to` already held with `from`'s value: no write")
    static let failed = JobCount("failed", "keys that could not be read, decoded, written or removed")
    static let heldBack = JobCount("heldBack", "deletions not made because they were more than `maxDeletes` allows")

    let name = "mirror"
    let summary = "make one provider hold exactly another's keys and values, one way; the source is never written"
    let fields = [
        JobField("from", .provider, required: true, summary: "the provider mirrored; never written"),
        JobField("to", .provider, required: true, summary: "the provider made to match it"),
        keysField,
        JobField(
            "deletes", .boolean, defaultValue: "true",
            summary: "remove keys `from` does not have from `to` (within `keys`); false only adds and updates"),
        JobField(
            "maxDeletes", .deleteLimit, defaultValue: "50%",
            summary: "the most keys one run may remove from `to`: a count, or a percentage of the keys `to` held; "
                + "over it the job removes none and fails, and `cloudsync run --force` allows it once"),
    ]
    let counts = [copied, updated, deleted, unchanged, failed, heldBack]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        let from = values.text("from") ?? ""
        let to = values.text("to") ?? ""
        guard from != to else { throw JobConfigurationError(field: "to", "a mirror needs two different providers") }
        return Configuration(
            from: from, to: to, keys: values.list("keys"), deletes: values.boolean("deletes") ?? true,
            maxDeletes: values.deleteLimit("maxDeletes") ?? .standard)
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] {
        [configuration.from, configuration.to]
    }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "mirror \(configuration.from) -> \(configuration.to)\(planKeys(configuration.keys)), "
            + (configuration.deletes
                ? "removing keys \(configuration.from) lacks (at most \(configuration.maxDeletes.description))"
                : "never removing")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let (from, to) = (configuration.from, configuration.to)
        let store = context.store
        let pageSize = context.pageSize(for: [from, to])
        let listing = TwoSidedListing(
            from: from, to: to, store: store, pageSize: pageSize, filter: keyFilter(configuration.keys))
        try await listing.prepare(providers: context.providers)
        let extra = try KeySpill()
        var extraCount = 0
        var destinationKeys = 0
        var done = 0
        while !context.isInterrupted {
            let page = try await listing.nextPage()
            guard !page.isEmpty else { break }
            destinationKeys += page.filter(\.onDestination).count
            let onlyAtDestination = page.filter { !$0.onSource }.map(\.key)
            if configuration.deletes, !onlyAtDestination.isEmpty {
                try extra.add(onlyAtDestination)
                extraCount += onlyAtDestination.count
            }
            try await mirrorPage(page.filter(\.onSource), from: from, to: to, in: context, report: &report)
            done += page.count
            context.progress(done, nil)
        }
        guard !context.isInterrupted else {
            report.status = .interrupted
            return
        }
        guard configuration.deletes, extraCount > 0 else { return }
        let allowed = configuration.maxDeletes.allowed(snapshotKeys: destinationKeys)
        if extraCount > allowed && !context.isForced {
            report[Self.heldBack] = extraCount
            report.status = .failed
            report.error = RunReport.Failure(
                key: "", provider: to, code: ErrorCode.tooManyDeletes.rawValue,
                message:
                    "this mirror would remove \(extraCount) of the \(destinationKeys) keys \(to) holds, more than "
                    + "maxDeletes (\(configuration.maxDeletes.description)) allows, so it removed none; check that "
                    + "\(from) is the provider you meant, then run again with --force to allow them once")
            return
        }
        var lists = KeyLists()
        var after: String?
        while !context.isInterrupted {
            let keys = try extra.keys(after: after, limit: pageSize)
            guard let last = keys.last else { break }
            after = last
            for (key, outcome) in zip(keys, try await store.remove(keys, from: to)) {
                switch outcome {
                case .success:
                    report.add(1, to: Self.deleted)
                    lists.add(key, to: Self.deleted)
                case .failure(let error):
                    report.record([KeyFailure(key: key, error: error)])
                    report.add(1, to: Self.failed)
                }
            }
        }
        report.entry.keyLists = lists.lists
        if context.isInterrupted { report.status = .interrupted }
    }

    /// Reads one page of `from`'s keys on both sides and writes to `to` those it lacks or holds otherwise.
    private func mirrorPage(
        _ entries: [TwoSidedListing.Entry], from: String, to: String, in context: JobContext,
        report: inout JobReport
    ) async throws(CloudSyncError) {
        guard !entries.isEmpty else { return }
        let store = context.store
        let sourceValues = try await store.readEach(entries.map(\.key), from: from)
        let held = entries.filter(\.onDestination).map(\.key)
        let heldValues = try await store.readEach(held, from: to)
        var destination: [StoreKey: Result<String?, CloudSyncError>] = [:]
        for (key, value) in zip(held, heldValues) { destination[StoreKey(key)] = value }
        var writes: [KeyValue] = []
        var isUpdate: [Bool] = []
        for (entry, read) in zip(entries, sourceValues) {
            let value: String
            switch read {
            case .failure(let error):
                report.record([KeyFailure(key: entry.key, error: error)])
                report.add(1, to: Self.failed)
                continue
            case .success(nil):
                // Gone from `from` since it was listed: the next run sees whether `to` should lose it.
                continue
            case .success(let read?): value = read
            }
            switch destination[StoreKey(entry.key)] {
            case .success(let current?)? where current.utf8.elementsEqual(value.utf8):
                report.add(1, to: Self.unchanged)
            case .failure(let error)? where error.code != .decode:
                // Whether `to` holds it, and what, is unknown: writing could replace a value no one has seen.
                report.record([KeyFailure(key: entry.key, error: error)])
                report.add(1, to: Self.failed)
            case .some(.success(.some)), .some(.failure):
                writes.append(KeyValue(entry.key, value))
                isUpdate.append(true)
            case .some(.success(nil)), nil:
                writes.append(KeyValue(entry.key, value))
                isUpdate.append(false)
            }
        }
        guard !writes.isEmpty else { return }
        for ((item, update), outcome) in zip(zip(writes, isUpdate), try await store.write(writes, to: to)) {
            switch outcome {
            case .success: report.add(1, to: update ? Self.updated : Self.copied)
            case .failure(let error):
                report.record([KeyFailure(key: item.key, error: error)])
                report.add(1, to: Self.failed)
            }
        }
    }
}
