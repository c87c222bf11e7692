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

extension JobContext {
    /// Plans copying `from` → `to` into the plan file at `path`.
    ///
    /// Lists `from` page by page and plans each batch as it comes; writes nothing else. Returns the plan's keys by action.
    func writePlan(
        _ header: SavedPlanHeader, path: String, from: String, to: String, keys: [String]?, overwrite: Overwrite,
        reshape: MigrationReshape, report: inout JobReport
    ) async throws(CloudSyncError) -> [PlannedCopy.Action: Int] {
        let writer = try SavedPlanFile.Writer(path: path, header: header)
        let salt = Hex.decode(header.salt) ?? []
        let filter = keyFilter(keys)
        let batchSize = pageSize(for: [from, to])
        var counts: [PlannedCopy.Action: Int] = [:]
        var pending: [String] = []
        var cursor: String?
        var done = 0
        func plan(_ batch: [String]) async throws(CloudSyncError) {
            let plans = await store.maintenance.planCopies(
                batch, from: from, to: to, overwrite: overwrite, reshape: reshape, salt: salt)
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
        report: inout JobReport, onLanded: (([LandedCopy]) async -> Void)? = nil
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
                batch, from: from, to: to, reshape: reshape, salt: salt)
            var landed: [LandedCopy] = []
            var failures: [KeyFailure] = []
            for (plan, outcome) in zip(batch, outcomes) {
                switch outcome {
                case .written(let digest):
                    counts.written += 1
                    landed.append(LandedCopy(key: plan.key, sourceDigest: digest))
                case .alreadyApplied(let digest):
                    counts.alreadyApplied += 1
                    if let digest {
                        landed.append(LandedCopy(key: plan.key, sourceDigest: digest))
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
