import CloudSync
import CloudSyncPipeline
import CloudSyncSodium

/// What applying a saved plan did, key by key, counted.
struct AppliedPlanCounts {
    /// Keys written now.
    var written = 0
    /// Keys the destination already held the planned value for (applied before, or planned unchanged).
    var alreadyApplied = 0
    /// Of those, the keys whose source no longer holds what the plan saw (a move removed it already, or it changed).
    var alreadyAppliedSourceMoved = 0
    /// Keys the plan leaves alone (`skip`, `fail`).
    var notPlanned = 0
    /// Keys whose source or destination changed since the plan: untouched.
    var changedSincePlan = 0
    /// Keys that failed now.
    var failed = 0
}

/// How a migration's step rewrites keys within one provider (``JobFieldValues/inPlace``).
struct InPlaceRewrite: Sendable, Equatable {
    /// Whether a renamed key may replace another value its new name holds; otherwise that key fails, and stays.
    var replacesTargets: Bool

    /// The rewrite the values of a migration's step describe (`overwrite: true` lets a rename replace); nil for a
    /// job's.
    init?(_ values: JobFieldValues) {
        guard values.inPlace else { return nil }
        replacesTargets = values.boolean("overwrite") ?? false
    }

    /// `plan` as this rewrite allows it: a rename onto a name that holds another value fails unless it may replace.
    func allowing(_ plan: PlannedCopy) -> PlannedCopy {
        guard !replacesTargets, plan.action == .overwrite, StoreKey(plan.target) != StoreKey(plan.key) else {
            return plan
        }
        var refused = plan
        refused.action = .fail
        refused.value = nil
        refused.failure = CloudSyncError(
            .config,
            "\(plan.key) was not renamed: \(plan.target) already holds another value; remove or rename that key "
                + "first, or set `overwrite: true` on the rename step to replace it", key: plan.key)
        return refused
    }

    /// Why a step rewriting keys in place ran without a plan: it runs only as a migration's step.
    static let needsPlan = CloudSyncError(
        .config, "a step rewriting keys within one provider runs only as a migration's step, through its plan")

    /// Whether a key landing as `plan` says leaves a source to remove: never the key itself, rewritten where it is.
    static func leavesSource(_ plan: PlannedCopy) -> Bool { StoreKey(plan.target) != StoreKey(plan.key) }
}

extension JobContext {
    /// Plans copying `from` → `to` into the plan file at `path`.
    ///
    /// Lists `from` page by page and plans each batch as it comes; writes nothing else. Returns the plan's keys by
    /// action. A step rewriting keys in place (`inPlace`) plans only the keys its rename matches, when it renames.
    func writePlan(
        _ header: SavedPlanHeader, path: String, from: String, to: String, keys: [String]?, overwrite: Overwrite,
        reshape: MigrationReshape, inPlace: InPlaceRewrite? = nil, report: inout JobReport
    ) async throws(CloudSyncError) -> [PlannedCopy.Action: Int] {
        let writer = try SavedPlanFile.Writer(path: path, header: header)
        let salt = Hex.decode(header.salt) ?? []
        var filter = keyFilter(keys)
        if inPlace != nil, let rename = reshape.rename {
            filter = { [filter] key in rename.matches(key) && (filter?(key) ?? true) }
        }
        let batchSize = pageSize(for: [from, to])
        var counts: [PlannedCopy.Action: Int] = [:]
        var pending: [String] = []
        var cursor: String?
        var done = 0
        func plan(_ batch: [String]) async throws(CloudSyncError) {
            var plans = await store.maintenance.planCopies(
                batch, from: from, to: to, overwrite: overwrite, reshape: reshape, salt: salt, inPlace: inPlace != nil)
            if let inPlace { plans = plans.map(inPlace.allowing) }
            try writer.add(plans)
            for plan in plans { counts[plan.action, default: 0] += 1 }
            report.record(plans.compactMap { plan in plan.failure.map { KeyFailure(key: plan.key, error: $0) } })
            done += batch.count
            progress(done, nil)
        }
        do throws(CloudSyncError) {
            repeat {
                let after = cursor
                let page = try await store.keyPage(of: from, after: after, limit: batchSize)
                try page.requireProgress(after: after, provider: from)
                cursor = page.nextCursor
                pending += filter.map { page.keys.filter($0) } ?? page.keys
                while pending.count >= batchSize || (cursor == nil && !pending.isEmpty) {
                    let batch = Array(pending.prefix(batchSize))
                    pending.removeFirst(batch.count)
                    try await plan(batch)
                }
                if isInterrupted {
                    writer.abandon()
                    report.status = .interrupted
                    return counts
                }
            } while cursor != nil
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        report.file = path
        return counts
    }

    /// Applies the plan file at `path` batch by batch.
    ///
    /// `onLanded` hears the keys the destination now holds as planned
    /// whose source still holds what the plan saw (a move removes those). Keys changed since the plan are recorded
    /// as failures naming which side changed.
    func applyPlan(
        _ header: SavedPlanHeader, path: String, from: String, to: String, reshape: MigrationReshape,
        inPlace: InPlaceRewrite? = nil, report: inout JobReport, onLanded: (([LandedCopy]) async -> Void)? = nil
    ) async throws(CloudSyncError) -> AppliedPlanCounts {
        let reader = try SavedPlanFile.Reader(path: path)
        let salt = Hex.decode(header.salt) ?? []
        let total = reader.trailer.counts.values.reduce(0, +)
        var counts = AppliedPlanCounts()
        var done = 0
        var interrupted = false
        try await reader.forEachBatch(of: pageSize(for: [from, to])) { batch throws(CloudSyncError) in
            guard !interrupted else { return }
            let outcomes = await store.maintenance.applyPlanned(
                batch, from: from, to: to, reshape: reshape, salt: salt, inPlace: inPlace != nil)
            var landed: [LandedCopy] = []
            var failures: [KeyFailure] = []
            for (plan, outcome) in zip(batch, outcomes) {
                // A key rewritten where it is has no source to remove once it lands.
                let leavesSource = inPlace == nil || InPlaceRewrite.leavesSource(plan)
                switch outcome {
                case .written(let digest):
                    counts.written += 1
                    if leavesSource { landed.append(LandedCopy(key: plan.key, sourceDigest: digest)) }
                case .alreadyApplied(let digest):
                    counts.alreadyApplied += 1
                    if let digest {
                        if leavesSource { landed.append(LandedCopy(key: plan.key, sourceDigest: digest)) }
                    } else {
                        counts.alreadyAppliedSourceMoved += 1
                    }
                case .notPlanned: counts.notPlanned += 1
                case .changedSincePlan(let side):
                    counts.changedSincePlan += 1
                    failures.append(KeyFailure(key: plan.key, error: Self.changedSincePlan(plan, side: side)))
                case .failed(let error):
                    counts.failed += 1
                    failures.append(KeyFailure(key: plan.key, error: error))
                }
            }
            report.record(failures)
            if let onLanded, !landed.isEmpty { await onLanded(landed) }
            done += batch.count
            progress(done, total)
            interrupted = isInterrupted
        }
        if interrupted { report.status = .interrupted }
        report.file = path
        return counts
    }

    private static func changedSincePlan(_ plan: PlannedCopy, side: AppliedCopy.ChangedSide) -> CloudSyncError {
        let what =
            switch side {
            case .source: "its value at the source changed since the plan"
            case .destination: "\(plan.target) changed at the destination since the plan"
            case .value: "its transform now gives another value than the plan recorded"
            }
        return CloudSyncError(
            .changedSinceRead, "\(plan.key) was left untouched: \(what); review it and make a new plan", key: plan.key)
    }
}
