import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncSodium
import Foundation

/// Applies a pipeline's pending migrations (`migrations:`) before its jobs, each once, in file order.
///
/// Each step is planned whole into a plan file in the state directory (`migrations/<id>/step-<n>.plan`), then that
/// plan is applied, as `cloudsync plan --out` and `cloudsync apply` do. The state records the step planned before
/// the plan is applied and the step applied after, so a run stopped in between resumes the same plan: a key it
/// already rewrote holds the planned value and is left alone, and no value is transformed twice. A step whose plan
/// finds a key that would fail writes nothing.
struct MigrationRun {
    let compiled: CompiledPipeline
    let options: RunOptions
    let session: RunSession
    let runID: String
    let runner: String

    /// The report entries of the migrations' steps, and whether the jobs must not run (a migration is refused,
    /// failed or was interrupted).
    func applyPending() async -> (entries: [RunReport.Job], stopped: Bool) {
        let migrations = compiled.spec.migrations
        // `plan --out` and `apply` run one job of a file whose migrations a run applies.
        guard !migrations.isEmpty, options.savedPlan == nil else { return ([], false) }
        guard let state = session.stateDatabase else {
            return (migrations.flatMap { $0.steps.map(RunReport.Job.init(skipped:)) }, false)
        }
        let ledger: MigrationLedger
        do throws(CloudSyncError) {
            ledger = try MigrationLedger(migrations: migrations, state: state)
        } catch {
            return ([refused(migrations[0], error)], true)
        }
        if let (id, error) = ledger.refusal, let migration = migrations.first(where: { $0.id == id }) {
            return ([refused(migration, error)], true)
        }
        let records = ledger.records
        var entries: [RunReport.Job] = []
        for (migration, record) in zip(migrations, records) where record?.status != .applied {
            if options.dryRun {
                entries += migration.steps.map(RunReport.Job.init(skipped:))
                continue
            }
            let applied = await apply(migration, record: record, state: state)
            entries += applied.entries
            if !applied.whole { return (entries, true) }
        }
        return (entries, false)
    }

    /// Applies `migration`'s steps not yet recorded applied; `whole` when every step is.
    private func apply(_ migration: MigrationSpec, record: MigrationRecord?, state: any PipelineState) async
        -> (entries: [RunReport.Job], whole: Bool)
    {
        var record =
            record
            ?? MigrationRecord(
                migration, appliedBy: Self.appliedBy, runId: runID, startedAt: iso8601(options.clock.nowMilliseconds()))
        record.runId = runID
        // Resumed with the steps it did not reach as the file now gives them (``MigrationSpec/continues(_:)``).
        record.checksum = migration.checksum
        record.stepChecksums = migration.stepChecksums
        var entries: [RunReport.Job] = []
        let directory = planDirectory(of: migration)
        do throws(CloudSyncError) {
            try record.save(migration.id, to: state)
            try Self.makeDirectory(directory)
            if let backup = migration.backup, record.backupSnapshot == nil, record.stepsApplied == 0,
                record.plannedStep == nil
            {
                let entry = await backUp(backup, recording: &record)
                entries.append(entry)
                try record.save(migration.id, to: state)
                guard record.backupSnapshot != nil else { return (entries, false) }
            }
            for number in migration.steps.indices.dropFirst(record.stepsApplied).map({ $0 + 1 }) {
                let entry = try await step(number, of: migration, recording: &record, state: state)
                entries.append(entry)
                guard entry.status == .ok else { return (entries, false) }
            }
            record.status = .applied
            record.error = nil
            record.appliedAt = iso8601(options.clock.nowMilliseconds())
            try record.save(migration.id, to: state)
            return (entries, true)
        } catch {
            entries.append(refused(migration, error))
            return (entries, false)
        }
    }

    /// Plans step `number` of `migration` (unless a run that stopped planned it already) and applies the plan,
    /// recording each phase in `record`; answers the phase's entry that ended it (the plan's when it failed).
    private func step(
        _ number: Int, of migration: MigrationSpec, recording record: inout MigrationRecord, state: any PipelineState
    ) async throws(CloudSyncError) -> RunReport.Job {
        let step = migration.steps[number - 1]
        let path = planDirectory(of: migration) + "/step-\(number).plan"
        let header: SavedPlanHeader
        if record.plannedStep == number {
            header = try Self.resumedPlan(at: path, of: migration, step: number)
        } else {
            header = self.header(of: number, in: migration)
            let planned = await executor(.write(header, path: path)).run(step)
            guard planned.status == .ok else {
                record.error = "step \(number) was not applied: \(planned.error?.message ?? "its plan failed")"
                try record.save(migration.id, to: state)
                return finished(Self.unwritten(planned))
            }
            record.plannedStep = number
            try record.save(migration.id, to: state)
        }
        let applied = finished(await executor(.apply(header, path: path)).run(step))
        if applied.status == .ok {
            record.stepsApplied = number
            record.plannedStep = nil
        } else {
            record.error = "step \(number) ended \(applied.status.rawValue); the next run resumes its plan"
        }
        try record.save(migration.id, to: state)
        return applied
    }

    /// `entry`, once told to whoever follows the run.
    func finished(_ entry: RunReport.Job) -> RunReport.Job {
        options.onJobFinished?(entry)
        return entry
    }

    /// Takes the backup before a migration's first step, keeping its snapshot's id in `record` (or why there is none).
    private func backUp(_ backup: MigrationBackup, recording record: inout MigrationRecord) async -> RunReport.Job {
        let entry = finished(await executor(nil).run(backup.job))
        if entry.status == .ok, let snapshot = entry.snapshot {
            record.backupSnapshot = snapshot
        } else {
            record.error = "its backup before the first step did not finish, so nothing was rewritten"
        }
        return entry
    }

    /// Where `migration`'s step plans are kept: `migrations/<id>` in the state directory.
    func planDirectory(of migration: MigrationSpec) -> String {
        compiled.spec.state + "/migrations/" + migration.id
    }

    /// The executor of a step's one phase: making its plan, or applying it.
    func executor(_ mode: SavedPlanMode?) -> JobExecutor {
        var options = options
        options.savedPlan = mode
        return JobExecutor(
            store: session.store, compiled: compiled, options: options, providers: session.providers,
            unopened: session.unopened, stateDatabase: session.stateDatabase, outbox: session.outbox, runID: runID,
            runner: runner)
    }

    /// A new plan's header for step `number`: bound to the step's checksum rather than the whole file's digest.
    private func header(of number: Int, in migration: MigrationSpec) -> SavedPlanHeader {
        let step = migration.steps[number - 1]
        return SavedPlanHeader(
            pipeline: compiled.spec.file, pipelineDigest: migration.stepChecksums[number - 1], job: step.name,
            type: step.type,
            fields: step.job.fields.values.mapValues(\.planText),
            createdAt: iso8601(options.clock.nowMilliseconds()), salt: Hex.encode(SecureRandom.bytes(count: 16)))
    }

    /// The header of a step's plan made by an earlier run, which this run finishes; never planned again, since some
    /// of its keys may already be rewritten.
    private static func resumedPlan(at path: String, of migration: MigrationSpec, step: Int) throws(CloudSyncError)
        -> SavedPlanHeader
    {
        let header: SavedPlanHeader
        do throws(CloudSyncError) {
            header = try SavedPlanFile.Reader(path: path).header
        } catch {
            throw CloudSyncError(
                .config,
                "migration \(migration.id) stopped while applying step \(step), whose plan \(path) cannot be read "
                    + "(\(error.message)); it is not planned again, since some keys may already be rewritten: "
                    + "restore the file (a run on another machine keeps it in its own state directory) and run again")
        }
        guard header.pipelineDigest == migration.stepChecksums[step - 1] else {
            throw CloudSyncError(
                .config,
                "the plan \(path) of migration \(migration.id) was made for step \(step) with checksum "
                    + "\(header.pipelineDigest), not \(migration.stepChecksums[step - 1]); put the step back as it "
                    + "was, and run again")
        }
        return header
    }

    /// A step whose plan found keys that would fail: nothing of it was written, so it counts nothing but those.
    private static func unwritten(_ planned: RunReport.Job) -> RunReport.Job {
        var entry = planned
        for name in entry.counts.keys where name != "failed" { entry.counts[name] = 0 }
        if entry.error == nil, let first = entry.failures.first {
            entry.error = RunReport.Failure(
                key: "", provider: nil, code: first.code,
                message: "nothing of this step was written: its plan found \(entry.counts["failed"] ?? 0) keys "
                    + "that would fail; fix them (see the failures) and run again")
        }
        return entry
    }

    /// The entry of a migration refused or stopped by `error`: named by its id, as its first step's type, ended
    /// `error`.
    func refused(_ migration: MigrationSpec, _ error: CloudSyncError) -> RunReport.Job {
        var entry = RunReport.Job(skipped: migration.steps[0])
        entry.name = "migration \(migration.id)"
        entry.status = .error
        entry.error = RunReport.Failure(error)
        return finished(entry)
    }

    private static func makeDirectory(_ path: String) throws(CloudSyncError) {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CloudSyncError(
                .config, "cannot create \(path) for the migration's plans: \(describeFileError(error))")
        }
    }

    /// Who applies a migration: `user@host`.
    static var appliedBy: String {
        let user =
            ProcessInfo.processInfo.environment["USER"] ?? getpwuid(getuid()).map {
                String(cString: $0.pointee.pw_name)
            } ?? "uid \(getuid())"
        return "\(user)@\(ProcessInfo.processInfo.hostName)"
    }
}
