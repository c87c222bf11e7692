import CloudSync
import CloudSyncPipeline
import Foundation

/// How `cloudsync run` was asked to run.
public struct RunOptions: Sendable {
    /// Only the jobs with these names (all when empty), in file order; with ``runNeeds``, also the jobs they need.
    public var jobNames: [String] = []
    /// Whether naming jobs in ``jobNames`` also runs the jobs they need, transitively (`--no-needs` turns it off,
    /// and then a named job runs whether or not what it needs ran).
    public var runNeeds = true
    /// Run every job without changing anything: providers, state and the outbox are opened read-only or copied, no lock
    /// is taken, and exports are counted but not written.
    public var dryRun = false
    /// Confirms `clear` jobs that do not say `confirm: true`.
    public var yes = false
    /// Lets sync jobs delete more keys than their `maxDeletes` allows, for this run only.
    public var force = false
    /// Makes every sync job read and decode every copy, as `readUnchanged: true` does, for this run only
    /// (`--read-unchanged`).
    public var readUnchanged = false
    /// A saved plan the run's one job writes or applies (`cloudsync plan --out`, `cloudsync apply`).
    public var savedPlan: SavedPlanMode?
    /// The migration this run undoes instead of applying migrations and running jobs (`cloudsync migrations undo`).
    public var undoMigration: String?
    /// Overrides the file's report path; `-` writes the report to standard output.
    public var reportPath: String?
    /// Whether to help the run another runner holds the lock for (`--join`), never starting one.
    ///
    /// Its outbox drain and its sharded jobs' ranges are worked on until it ends; with no run under way (after
    /// ``joinWait``), the runner does nothing and says so (``JoinedRun/run`` is nil). Needs the state in PostgreSQL.
    public var join = false
    /// How long a joining runner waits for a run to start when none is under way (`--join-wait`); zero by default.
    public var joinWait: Duration = .zero
    /// The run's name from the scheduler (`--run-id`), used as its id.
    ///
    /// A runner given it that finds the pipeline held by the run of that name joins it rather than refusing (so every
    /// runner of a scheduled job can be started alike); a joiner joins only that run; and a name whose run already
    /// finished its work (`ok` or `queued`) is not run again: the runner does nothing and says so
    /// (``RunOutcome/alreadyFinished``). A run of that name that failed, errored or was interrupted runs again.
    public var runID: String?
    /// Raised when the task running ``PipelineRunner/run()`` is cancelled; jobs stop at their next batch boundary.
    var interrupt = InterruptFlag()
    /// The run's clock (the store's deadlines, memoised availability, report times): the system's, or a test's.
    var clock: any StoreClock = SystemClock()
    /// Told, in words for people, what each job did as it ends.
    public var onJobFinished: (@Sendable (RunReport.Job) -> Void)?
    /// Told how far the running job is: its name, how many done, the total when known, and of what (`keys`, `packs`).
    public var onProgress: (@Sendable (String, Int, Int?, String) -> Void)?
    /// Where the providers log (their HTTP requests at debug level), each line starting with the provider's id;
    /// disabled by default.
    public var logger: ProviderLogger = .disabled
    /// Where the pipeline's state may be kept: the built-in stores, or a program's own registered beside them.
    public var stateStores = BuiltInStateStores.registry

    /// Options for a plain run: every job, changes made, `clear` jobs only with their own `confirm: true`, the report
    /// where the file says.
    public init() {}
}

/// What a run ended with.
public struct RunOutcome: Sendable {
    /// The run's report, also written to ``reportPath`` unless it went to standard output.
    public var report: RunReport
    /// Where the report was written; nil when it went to standard output.
    public var reportPath: String?
    /// Why the report (or the latest copy, or the metrics textfile) could not be written, when it could not; the
    /// jobs ran all the same and ``status`` is theirs.
    public var reportError: String? = nil
    /// For a runner that joined another's run (`--join`), what it did there; nil for a run of its own, whose report
    /// this is.
    public var joined: JoinedRun? = nil
    /// For a run named with ``RunOptions/runID`` that had already finished its work, or a joiner whose named run had
    /// finished before it could join: that run's record; nothing ran.
    public var alreadyFinished: RunRecord? = nil
    /// How the run ended; the command line turns it into the exit status.
    public var status: RunStatus { report.status }
}

/// What a runner that joined another's run did: ranges of which sharded jobs.
///
/// The run's one report is the starter's.
public struct JoinedRun: Sendable, Equatable {
    /// The id of the run it joined; nil when no run (of the name it was given) was under way to join.
    public var run: String?
    /// Ranges it finished, by job.
    public var ranges: [String: Int]
    /// Outbox entries it claimed in the run's shared drain (delivered, rescheduled or given up).
    public var drained = 0
}

/// Runs a compiled pipeline's jobs in order in a ``RunSession`` and produces the report.
public struct PipelineRunner: Sendable {

    let compiled: CompiledPipeline
    let options: RunOptions

    /// A runner of `compiled` under `options`; nothing is opened until ``run()``.
    public init(_ compiled: CompiledPipeline, options: RunOptions) {
        self.compiled = compiled
        self.options = options
    }

    /// Runs the jobs and writes the report.
    ///
    /// Cancelling the task that calls this stops the run the way SIGINT does: the running job finishes the batch
    /// it is in (so no batch is left half sent), the jobs not started are skipped, and the report says
    /// `interrupted`. Batches run in a task of their own so that the cancellation never cuts a provider call short.
    public func run() async throws(RunRefusal) -> RunOutcome {
        var options = options
        let interrupt = InterruptFlag()
        options.interrupt = interrupt
        let runner = PipelineRunner(compiled, options: options)
        let result: Result<RunOutcome, RunRefusal> = await withTaskCancellationHandler {
            await Task { () -> Result<RunOutcome, RunRefusal> in
                do throws(RunRefusal) {
                    return .success(try await runner.runJobs())
                } catch {
                    return .failure(error)
                }
            }.value
        } onCancel: {
            interrupt.raise()
        }
        return try result.get()
    }

    /// `attempt`: how often a runner given a run's name found the lock held by a run that then ended before it could
    /// join; it tries to start again (and finds the run finished) up to twice.
    private func runJobs(attempt: Int = 0) async throws(RunRefusal) -> RunOutcome {
        let clock = options.clock
        let started = clock.nowMilliseconds()
        // A dry run keeps an id of its own: its record must not stand for the named run it rehearses.
        let runID = (options.dryRun ? nil : options.runID) ?? "\(compiled.spec.name)-\(started)-\(getpid())"
        let runner = ShardedJobRun.nextRunnerName()
        // A joiner never starts a run: starting is the starter's, so a late joiner cannot begin a second one.
        if options.join, !options.dryRun {
            return try await join(options.runID, wait: options.joinWait, runner: runner, started: started, clock: clock)
        }
        let session: RunSession
        do throws(RunRefusal) {
            session = try await RunSession.open(
                compiled, access: options.dryRun ? .dryRun : .write, runID: runID, clock: clock,
                logger: options.logger, stateStores: options.stateStores)
        } catch {
            return try await refused(error, runID: runID, runner: runner, started: started, attempt: attempt)
        }
        if let named = options.runID, !options.dryRun, let finished = try? session.stateDatabase?.run(id: named),
            !finished.dryRun, finished.status == .ok || finished.status == .queued
        {
            await session.close()
            // Nothing ran, and no report is written: the finished run's stands.
            return RunOutcome(
                report: reportOfNoJobs(runID: named, status: .ok, started: started, clock: clock), reportPath: nil,
                alreadyFinished: finished)
        }
        let drain = await drainOutbox(of: session, runID: runID, runner: runner)
        // The jobs run on the key set the file's migrations leave: none while one is refused or stopped partway.
        let migrationRun = MigrationRun(
            compiled: compiled, options: options, session: session, runID: runID, runner: runner)
        if let undone = options.undoMigration {
            let entries = drain.failure == nil ? await migrationRun.undo(undone) : []
            return await finish(
                session, jobs: entries, unmetNeeds: false, drain: drain, runID: runID, started: started)
        }
        let migrations: (entries: [RunReport.Job], stopped: Bool) =
            drain.failure == nil ? await migrationRun.applyPending() : ([], false)
        let (jobs, unmetNeeds) = await runSelectedJobs(
            in: session, runID: runID, runner: runner, stopped: drain.failure != nil || migrations.stopped)
        return await finish(
            session, jobs: migrations.entries + jobs, unmetNeeds: unmetNeeds, drain: drain, runID: runID,
            started: started)
    }

    /// What to do when the session could not be opened: join the run that holds the lock when this runner was given
    /// its name, else leave a report saying why nothing ran (a run refused by a lock leaves its own report, but not
    /// `latest` or the textfile, which stay the running run's to write) and throw the refusal on.
    private func refused(_ error: RunRefusal, runID: String, runner: String, started: Int64, attempt: Int)
        async throws(RunRefusal) -> RunOutcome
    {
        let clock = options.clock
        // Runners of one scheduled run, started alike: the one that took the lock runs, the others help it.
        if let named = options.runID, !options.dryRun, case .lockedElsewhere = error {
            let joined = try await join(named, wait: .zero, runner: runner, started: started, clock: clock)
            if joined.joined?.run != nil { return joined }
            // The holder ran another run, or this one ended meanwhile: look again, once it may have finished.
            if attempt < 2 { return try await runJobs(attempt: attempt + 1) }
        }
        switch error {
        case .cannotStart(let reason), .stateUnavailable(let reason):
            return try startFailure(reason, runID: runID, started: started, clock: clock, reportOnly: false)
        case .lockedElsewhere(let holder, let lock):
            _ = try? startFailure(
                CloudSyncError(
                    .locked,
                    "another run of this pipeline (\(holder ?? "a runner that has only just taken it")) holds "
                        + "\(lock); this one did nothing"), runID: runID, started: started, clock: clock,
                reportOnly: true)
        case .locked(let pid, let lockFile):
            _ = try? startFailure(
                CloudSyncError(
                    .locked,
                    "another run of this pipeline (\(RunRefusal.holder(pid))) holds its lock \(lockFile); this one did "
                        + "nothing"), runID: runID, started: started, clock: clock, reportOnly: true)
        }
        throw error
    }

    /// What the outbox drain before the first job did.
    private struct OutboxDrainOutcome {
        var pendingBefore = 0
        var drained = 0
        var drainedBy: [String: Int]?
        /// Runners may still be delivering: no job runs.
        var failure: CloudSyncError?
    }

    /// Drains the outbox before the first job, so jobs see the state earlier runs meant to leave; with a state that
    /// runners share, every runner that joins helps. (Only the runner holding the lock queues writes, so an empty
    /// outbox has nothing for anyone to drain.)
    private func drainOutbox(of session: RunSession, runID: String, runner: String) async -> OutboxDrainOutcome {
        var outcome = OutboxDrainOutcome(pendingBefore: session.outbox?.count ?? 0)
        guard let outbox = session.outbox, outcome.pendingBefore > 0, !options.dryRun,
            let shared = session.stateDatabase?.shared
        else {
            outcome.drained = (try? await session.store.flushOutbox())?.drained ?? 0
            return outcome
        }
        do throws(CloudSyncError) {
            (outcome.drained, outcome.drainedBy) = try await drainShared(
                outbox, state: shared, session: session, runID: runID, runner: runner, clock: options.clock)
        } catch {
            outcome.failure = error
        }
        return outcome
    }

    /// Runs the selected jobs in file order, and answers their report entries.
    ///
    /// `stopped` (or an interrupt) skips those not started. `unmetNeeds` says whether a job was skipped for a need
    /// that did not end ok.
    private func runSelectedJobs(in session: RunSession, runID: String, runner: String, stopped: Bool) async
        -> (jobs: [RunReport.Job], unmetNeeds: Bool)
    {
        var jobs: [RunReport.Job] = []
        var ended: [String: JobStatus] = [:]
        var unmetNeeds = false
        for job in JobGraph(compiled.spec.jobs).selected(options.jobNames, withNeeds: options.runNeeds) {
            // No job writes while runners may still be delivering older queued writes of the same keys.
            if options.interrupt.isRaised || stopped {
                jobs.append(RunReport.Job(skipped: job))
                continue
            }
            if let skipped = Self.skippedForNeeds(job, ended: ended) {
                ended[job.name] = .skipped
                unmetNeeds = true
                options.onJobFinished?(skipped)
                jobs.append(skipped)
                continue
            }
            let executor = JobExecutor(
                store: session.store, compiled: compiled, options: options, providers: session.providers,
                unopened: session.unopened, stateDatabase: session.stateDatabase,
                outbox: session.outbox, runID: runID, runner: runner)
            let result = await executor.run(job)
            ended[job.name] = result.status
            options.onJobFinished?(result)
            jobs.append(result)
        }
        return (jobs, unmetNeeds)
    }

    /// A job runs only when every job it needs that ran this time ended ok: the entry of one that does not, skipped
    /// with `ERR_NEEDS_NOT_MET`; nil for one that may run.
    private static func skippedForNeeds(_ job: JobSpec, ended: [String: JobStatus]) -> RunReport.Job? {
        guard
            let (needed, status) = job.needs.lazy.compactMap({ name in ended[name].map { (name, $0) } }).first(
                where: { $0.1 != .ok })
        else { return nil }
        var skipped = RunReport.Job(skipped: job)
        skipped.error = RunReport.Failure(
            key: "", provider: nil, code: ErrorCode.needsNotMet.rawValue,
            message: "not run: it needs job \(needed), which ended \(status.rawValue); fix what \(needed) "
                + "reported, then run again")
        return skipped
    }

    /// How a run ended: interrupted, `error` when a job did or the drain failed, `failed` when a job did or was
    /// skipped for a need, `queued` when writes wait in the outbox, else `ok`.
    private func status(of jobs: [RunReport.Job], unmetNeeds: Bool, drainFailed: Bool, session: RunSession)
        -> RunStatus
    {
        if options.interrupt.isRaised { return .interrupted }
        if drainFailed || jobs.contains(where: { $0.status == .error }) { return .error }
        if jobs.contains(where: { $0.status == .failed }) || unmetNeeds { return .failed }
        return (session.outbox?.count ?? 0) > 0 && !options.dryRun ? .queued : .ok
    }

    /// Writes the run's report where the file says, records the run in the state (which, when runners share it,
    /// keeps the report too, so every host serving the pipeline can show it) and closes the session.
    private func finish(
        _ session: RunSession, jobs: [RunReport.Job], unmetNeeds: Bool, drain: OutboxDrainOutcome, runID: String,
        started: Int64
    ) async -> RunOutcome {
        let spec = compiled.spec
        let providerLines = await session.providerLines()
        let finished = options.clock.nowMilliseconds()
        let status = status(of: jobs, unmetNeeds: unmetNeeds, drainFailed: drain.failure != nil, session: session)
        var report = RunReport(
            pipeline: spec.name, runId: runID, status: status, dryRun: options.dryRun, startedAt: iso8601(started),
            finishedAt: iso8601(finished), durationMs: finished - started, jobs: jobs,
            outbox: RunReport.Outbox(
                pendingBefore: drain.pendingBefore, drained: drain.drained, dropped: session.dropped,
                pendingAfter: session.outbox?.count ?? 0, drainedBy: drain.drainedBy,
                pendingByProvider: session.outbox?.countByProvider ?? [:]),
            providers: providerLines)
        report.timeoutMs = spec.store.timeoutMs
        report.error = drain.failure.map { RunReport.Failure($0) }
        let writer = ReportWriter(spec: spec, override: options.reportPath, reportOnly: options.dryRun)
        var writeError: CloudSyncError?
        var path = writer.path(startedAt: report.startedAt)
        do throws(CloudSyncError) {
            path = try writer.write(report)
        } catch {
            writeError = error
        }
        var jobCounts: [String: Int] = [:]
        for job in jobs { jobCounts[job.status.rawValue, default: 0] += 1 }
        try? session.stateDatabase?.record(
            RunRecord(
                id: runID, startedAt: report.startedAt, finishedAt: report.finishedAt, status: status,
                dryRun: options.dryRun, jobs: jobCounts, report: writeError == nil ? path : nil))
        try? session.stateDatabase?.shared?.keepReport(report.json(), of: runID)
        await session.close()
        return RunOutcome(report: report, reportPath: writeError == nil ? path : nil, reportError: writeError?.message)
    }

    /// The report of a run that could not start: status `error`, why, every selected job `skipped`.
    ///
    /// A monitor reading the report (or `latest`, or the textfile) sees the failure instead of the previous run's
    /// success.
    private func startFailure(
        _ reason: CloudSyncError, runID: String, started: Int64, clock: any StoreClock, reportOnly: Bool
    ) throws(RunRefusal) -> RunOutcome {
        let spec = compiled.spec
        let report = reportOfNoJobs(
            runID: runID, status: .error, started: started, clock: clock,
            jobs: JobGraph(spec.jobs).selected(options.jobNames, withNeeds: options.runNeeds).map(
                RunReport.Job.init(skipped:)), failure: reason)
        let writer = ReportWriter(
            spec: spec, override: options.reportPath, reportOnly: options.dryRun || reportOnly)
        do throws(CloudSyncError) {
            return RunOutcome(report: report, reportPath: try writer.write(report))
        } catch {
            throw RunRefusal.cannotStart(
                CloudSyncError(
                    reason.code, reason.message + "; and " + error.message, provider: reason.provider, key: reason.key))
        }
    }
}

extension PipelineRunner {
    /// The report of a run whose jobs did not run in this process (it could not start, a joiner's, a named run
    /// already finished): `jobs` as given, no outbox or provider figures, and `failure` as its error.
    func reportOfNoJobs(
        runID: String, status: RunStatus, started: Int64, clock: any StoreClock, jobs: [RunReport.Job] = [],
        failure: CloudSyncError? = nil
    ) -> RunReport {
        let finished = clock.nowMilliseconds()
        var report = RunReport(
            pipeline: compiled.spec.name, runId: runID, status: status, dryRun: options.dryRun,
            startedAt: iso8601(started), finishedAt: iso8601(finished), durationMs: finished - started, jobs: jobs,
            outbox: RunReport.Outbox(pendingBefore: 0, drained: 0, dropped: [:], pendingAfter: 0), providers: [])
        report.timeoutMs = compiled.spec.store.timeoutMs
        report.error = failure.map {
            RunReport.Failure(key: "", provider: nil, code: $0.code.rawValue, message: $0.message)
        }
        return report
    }
}
