import CloudSync
import CloudSyncPipeline
import Foundation

/// A job split into key ranges that every runner of the pipeline leases and works through (`shards: N`), with the
/// state in PostgreSQL.
///
/// The runner that started the run samples the source's listing for the ranges' boundaries, records the ranges, then
/// leases and runs them like any runner that joined (`cloudsync run --join`). Each batch a range's run finishes records
/// its last key and its counts, under the runner's name, and renews the lease, all at once; so a runner that stops
/// (killed, disconnected, hung past its lease) leaves its range to be leased again and resumed after the last key it
/// recorded, and no count is lost or counted twice. The starter waits for every range, then writes the one report:
/// the counts summed, each runner's beside them, and how many ranges were taken over.
struct ShardedJobRun {
    /// How long a lease lasts without a renewal; runners renew at a third of it while a range runs.
    static let leaseMilliseconds: Int64 = {
        let given = ProcessInfo.processInfo.environment["CLOUDSYNC_SHARD_LEASE_MS"].flatMap { Int64($0) }
        return max(given ?? 60_000, 1_000)
    }()
    /// How often a runner with nothing to lease looks again while other runners finish theirs.
    static let pollInterval: Duration = .milliseconds(250)

    let state: any SharedPipelineState
    /// This runner's name in leases and reports: `host/pid`.
    let runner: String

    /// A name for the next run this process makes, the same for everything it does in shared state (ranges, the
    /// outbox drain): `host/pid` for the first; a process running several (tests) numbers the others.
    static func nextRunnerName() -> String {
        let number = made.withLock { made in
            made += 1
            return made
        }
        return "\(ProcessInfo.processInfo.hostName)/\(getpid())" + (number > 1 ? "#\(number)" : "")
    }

    private static let made = Protected(0)

    /// Runs `job` as the runner that started the run: records its ranges (or resumes the ones a stopped run of the
    /// same plan left), works through them with every runner that joins, waits for the last, and reports.
    func coordinate(
        _ job: JobSpec, sharding: JobSharding, runID: String, plan: String, context: JobContext,
        report: inout JobReport
    ) async throws(CloudSyncError) {
        var resumed: String?
        if let left = try state.unfinishedShardedJob(job.name), left.plan == plan {
            resumed = left.runID
            try state.adoptShardedJob(job.name)
        } else {
            let ranges = try await sampleRanges(of: sharding, context: context)
            try job.job.prepareSharded(in: context)
            try state.startShardedJob(
                job.name, runID: runID, plan: plan, ranges: ranges, at: iso8601(context.clock.nowMilliseconds()))
        }
        try await work(job, context: context)
        // The others' ranges: wait for them, and take over any whose runner stops.
        var ranges = sharding.shards
        while !context.isInterrupted {
            let standing = try state.shardStanding(job.name)
            ranges = standing.shards
            if standing.done == standing.shards { break }
            if standing.leasable > 0 {
                try await work(job, context: context)
                continue
            }
            try? await Task.sleep(for: Self.pollInterval)
        }
        if context.isInterrupted {
            report.status = .interrupted
            return
        }
        let outcome = try state.finishShardedJob(job.name)
        let totals = Self.record(outcome, of: job, ranges: ranges, resumed: resumed, into: &report)
        if let (shard, message) = outcome.errors.min(by: { $0.key < $1.key }) {
            report.status = .error
            report.error = RunReport.Failure(
                key: "", provider: nil, code: ErrorCode.provider.rawValue,
                message: "range \(shard) of \(ranges) could not run: \(message)")
            return
        }
        // What the whole job's counts call for, and what must see the whole job (a mirror's deletions); not after a
        // range that could not run, whose keys nobody saw.
        var whole = context
        whole.setAside = SetAsideKeys(store: state, job: job.name)
        try await job.job.finishSharded(in: whole, summed: totals, report: &report)
    }

    /// Puts what every range's runner did into the job's report (counts summed, failures, key lists, each runner's
    /// share); returns every count summed, undeclared ones included.
    private static func record(
        _ outcome: ShardOutcome, of job: JobSpec, ranges: Int, resumed: String?, into report: inout JobReport
    ) -> [String: Int] {
        var totals: [String: Int] = [:]
        for counts in outcome.counts.values {
            for (name, value) in counts { totals[name, default: 0] += value }
        }
        for count in job.job.counts { report.entry.counts[count.name] = totals[count.name] ?? 0 }
        report.entry.failures = outcome.failures
        report.entry.failuresOmitted = outcome.failuresOmitted
        report.entry.keyLists = outcome.keyLists
        let declared = Set(job.job.counts.map(\.name))
        let runners = Set(outcome.counts.keys).union(outcome.finished.keys).sorted()
        report.entry.shards = RunReport.Shards(
            count: ranges, takenOver: outcome.takenOver, resumedRun: resumed,
            runners: runners.map { name in
                RunReport.ShardRunner(
                    runner: name, ranges: outcome.finished[name] ?? 0,
                    counts: (outcome.counts[name] ?? [:]).filter { declared.contains($0.key) })
            })
        return totals
    }

    /// Leases ranges of `job` and runs them one after another until none is left to lease now; returns how many it
    /// ran.
    @discardableResult
    func work(_ job: JobSpec, context: JobContext) async throws(CloudSyncError) -> Int {
        var ran = 0
        while !context.isInterrupted,
            let leased = try state.leaseShard(job.name, runner: runner, leaseMs: Self.leaseMilliseconds)
        {
            try await run(job, leased, context: context)
            ran += 1
        }
        return ran
    }

    /// Runs one leased range, renewing its lease meanwhile, and records it done with the failures it named.
    private func run(_ job: JobSpec, _ leased: LeasedShard, context: JobContext) async throws(CloudSyncError) {
        let (state, runner, name, shard) = (self.state, self.runner, job.name, leased.shard)
        var context = context
        context.range = leased.range
        context.setAside = SetAsideKeys(store: state, job: name)
        context.shardProgress = { counts, lastKey, failures in
            (try? state.recordShardBatch(
                name, shard: shard, runner: runner, counts: counts, lastKey: lastKey, failures: failures,
                leaseMs: Self.leaseMilliseconds)) ?? false
        }
        // Renewed between batches too, so one slow batch does not lose the lease.
        let renewal = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Self.leaseMilliseconds / 3))
                if Task.isCancelled { break }
                _ = try? state.renewShardLease(name, shard: shard, runner: runner, leaseMs: Self.leaseMilliseconds)
            }
        }
        defer { renewal.cancel() }
        var report = JobReport(name: job.name, type: job.type, counts: job.job.counts)
        var failure: String?
        do throws(CloudSyncError) {
            try await job.job.run(in: context, report: &report)
        } catch {
            failure = "\(error.code.rawValue): \(error.message)"
        }
        // An interrupted range is left leased: its lease runs out, and a runner resumes it after its last batch.
        guard report.status != .interrupted, !context.isInterrupted || failure != nil else { return }
        _ = try state.finishShard(
            name, shard: shard, runner: runner, failures: report.entry.failures,
            omitted: report.entry.failuresOmitted, keyLists: report.entry.keyLists,
            error: failure ?? report.entry.error.map { "\($0.code): \($0.message)" })
    }

    /// Boundaries for `sharding.shards` ranges of nearly equal size, from a sample of the source's whole listing
    /// (a reservoir of 64 keys a range, so memory stays small whatever the key count).
    private func sampleRanges(of sharding: JobSharding, context: JobContext) async throws(CloudSyncError)
        -> [KeyRange]
    {
        // An empty source is the store's first provider (a sync of all of them).
        let source = sharding.source.isEmpty ? context.storeProviders.first ?? "" : sharding.source
        let capacity = sharding.shards * 64
        var reservoir: [String] = []
        reservoir.reserveCapacity(capacity)
        var seen = 0
        var generator = SystemRandomNumberGenerator()
        var cursor: String?
        repeat {
            let page = try await context.store.keyPage(
                of: source, after: cursor, limit: context.pageSize(for: [source], floor: 1000))
            for key in page.keys {
                seen += 1
                if reservoir.count < capacity {
                    reservoir.append(key)
                } else {
                    let slot = Int.random(in: 0..<seen, using: &generator)
                    if slot < capacity { reservoir[slot] = key }
                }
            }
            guard page.nextCursor != cursor else { break }
            cursor = page.nextCursor
        } while cursor != nil
        reservoir.sort { StoreKey.bytesPrecede($0, $1) }
        var boundaries: [String] = []
        for index in 1..<sharding.shards where !reservoir.isEmpty {
            let key = reservoir[min(reservoir.count - 1, index * reservoir.count / sharding.shards)]
            if boundaries.last.map({ StoreKey.compareBytes($0, key) < 0 }) ?? true { boundaries.append(key) }
        }
        return KeyRange.cut(at: boundaries)
    }
}

extension PipelineRunner {
    /// Works on the sharded jobs of the run another runner holds the lock for (`--join`), until that run ends; never
    /// starts one.
    ///
    /// The run to join is the one under way (only the one called `named`, when given), waited for up to `wait` when
    /// there is none; a runner that finds none does nothing (``JoinedRun/run`` is nil). Each sharded job the starter
    /// records is leased range by range beside it and the other runners; between jobs, and while the starter samples
    /// or runs unsharded jobs, it looks again every quarter second. It ends when that run no longer holds the lock
    /// (the starter finished or stopped), and reports only what it did: the run's one report is the starter's.
    func join(_ named: String?, wait: Duration, runner: String, started: Int64, clock: any StoreClock)
        async throws(RunRefusal) -> RunOutcome
    {
        let spec = compiled.spec
        let session = try await RunSession.open(
            compiled, access: .worker, clock: clock, logger: options.logger, stateStores: options.stateStores)
        guard let state = session.stateDatabase?.shared else {
            await session.close()
            throw RunRefusal.cannotStart(
                CloudSyncError(.config, "a runner can join only a pipeline whose state is in PostgreSQL"))
        }
        let found: (run: String?, finished: RunRecord?)
        do throws(CloudSyncError) {
            found = try await runToJoin(named, in: state, wait: wait, clock: clock)
        } catch {
            await session.close()
            throw RunRefusal.stateUnavailable(error)
        }
        guard let joined = found.run else {
            await session.close()
            var outcome = joinOutcome(
                JoinedRun(run: nil, ranges: [:]), runID: named ?? "", failure: nil, started, clock)
            outcome.alreadyFinished = found.finished
            return outcome
        }
        let executor = JobExecutor(
            store: session.store, compiled: compiled, options: options, providers: session.providers,
            unopened: session.unopened, stateDatabase: state, outbox: nil,
            runID: "\(spec.name)-\(started)-\(getpid())", runner: runner)
        var work = JoinedRun(run: joined, ranges: [:])
        var failure: CloudSyncError?
        var drain: SharedOutboxDrain?
        do throws(CloudSyncError) {
            // The starter's outbox rules decide what becomes of each entry this runner delivers.
            // (An outbox over memory, which cannot fail to open.)
            if spec.store.outbox.enabled, let rules = try? Outbox(limits: RunSession.outboxLimits(spec)) {
                drain = try await SharedOutboxDrain.open(
                    state, store: session.store, rules: rules, clock: clock, runner: runner)
            }
            try await help(joined, in: state, executor: executor, drain: drain, runner: runner, done: &work)
        } catch {
            failure = error
        }
        await drain?.close()
        await session.close()
        return joinOutcome(work, runID: joined, failure: failure, started, clock)
    }

    /// Drains the outbox beside the starter while its drain is open, and leases ranges of every sharded job under way,
    /// until run `joined` no longer holds the lock (looking again every quarter second while there is nothing to do)
    /// or the run is interrupted; what it did goes into `done`.
    private func help(
        _ joined: String, in state: any SharedPipelineState, executor: JobExecutor, drain: SharedOutboxDrain?,
        runner: String, done: inout JoinedRun
    ) async throws(CloudSyncError) {
        let sharded = ShardedJobRun(state: state, runner: runner)
        while !options.interrupt.isRaised {
            var ran = 0
            if let drain {
                let claimed = try await helpDrain(drain)
                done.drained += claimed
                ran += claimed
            }
            for name in try state.shardedJobsUnderWay() {
                guard let job = compiled.spec.jobs.first(where: { $0.name == name }) else { continue }
                let count = try await sharded.work(job, context: executor.context(for: job))
                done.ranges[name, default: 0] += count
                ran += count
            }
            if ran == 0 {
                guard try state.runUnderWay() == joined else { break }
                try? await Task.sleep(for: ShardedJobRun.pollInterval)
            }
        }
    }

    /// The run to join: the id of the run under way (the one called `named`, when given), looked for every quarter
    /// second for up to `wait`; or, when the run called `named` has already finished, its record; or neither.
    private func runToJoin(_ named: String?, in state: any SharedPipelineState, wait: Duration, clock: any StoreClock)
        async throws(CloudSyncError) -> (run: String?, finished: RunRecord?)
    {
        let until = clock.nowMilliseconds() + wait.milliseconds
        while true {
            if let current = try state.runUnderWay(), named == nil || current == named { return (current, nil) }
            if let named, let finished = try state.run(id: named), !finished.dryRun { return (nil, finished) }
            guard !options.interrupt.isRaised, clock.nowMilliseconds() < until else { return (nil, nil) }
            try? await Task.sleep(for: ShardedJobRun.pollInterval)
        }
    }

    /// A joining runner's outcome: what it did, in a report of its own that is never written (the run's is the
    /// starter's).
    private func joinOutcome(
        _ joined: JoinedRun, runID: String, failure: CloudSyncError?, _ started: Int64, _ clock: any StoreClock
    ) -> RunOutcome {
        let report = reportOfNoJobs(
            runID: runID, status: failure != nil ? .error : options.interrupt.isRaised ? .interrupted : .ok,
            started: started, clock: clock, failure: failure)
        return RunOutcome(report: report, reportPath: nil, joined: joined)
    }
}
