import CloudSync
import CloudSyncPipeline
import Foundation

/// Runs one job against the store and turns what happened into its report entry.
struct JobExecutor {
    let store: CloudStore
    let compiled: CompiledPipeline
    let options: RunOptions
    let providers: [String: any Provider]
    /// Providers that could not be opened: a job that needs one fails with its error.
    var unopened: [String: CloudSyncError] = [:]
    /// The pipeline's state database, where sync jobs keep their snapshots; nil in a dry run of a new pipeline.
    var stateDatabase: (any PipelineState)?
    /// The session's outbox, asked after each job for the writes it could not keep.
    var outbox: Outbox?
    /// The run's id, which a sharded job's ranges are recorded under.
    var runID = ""
    /// This runner's name in shared state (``ShardedJobRun/nextRunnerName()``).
    var runner = ""
    /// The only keys the job may touch (``JobContext/onlyKeys``); nil for those its fields select.
    var onlyKeys: Set<StoreKey>? = nil

    /// What `job` may use while it runs.
    func context(for job: JobSpec) -> JobContext {
        var context = JobContext(
            store: store, pipeline: compiled.spec.name, jobName: job.name,
            storeProviders: compiled.spec.store.providers,
            isDryRun: options.dryRun, isForced: options.force, isConfirmed: options.yes, compiled: compiled,
            providers: providers, state: stateDatabase, interrupt: options.interrupt,
            onProgress: options.onProgress)
        context.readsUnchanged = options.readUnchanged
        context.savedPlan = options.savedPlan
        context.onlyKeys = onlyKeys
        return context
    }

    func run(_ job: JobSpec) async -> RunReport.Job {
        var report = JobReport(name: job.name, type: job.type, counts: job.job.counts)
        let context = context(for: job)
        do throws(CloudSyncError) {
            try await checkProviders(of: job)
            // Split between runners with the state in PostgreSQL; a dry run reads the whole job itself.
            // A saved plan is made and applied by one runner, whole.
            if let sharding = job.job.sharding, !options.dryRun, options.savedPlan == nil,
                let shared = stateDatabase?.shared
            {
                try await ShardedJobRun(state: shared, runner: runner).coordinate(
                    job, sharding: sharding, runID: runID,
                    plan: job.type + ": " + job.job.plan(paths: PlanPaths(directory: compiled.spec.directory)),
                    context: context, report: &report)
            } else {
                try await job.job.run(in: context, report: &report)
            }
        } catch {
            report.status = .error
            report.error = RunReport.Failure(error)
        }
        // Writes that went unqueued because the outbox could not store them (a full disk) are named too, unless the job
        // already named the key as failed for that provider.
        // By bytes: a failure of one spelling of a key does not stand for its canonically equivalent twin.
        let named = Set(report.entry.failures.map { StoreKey("\($0.provider ?? "")/\($0.key)") })
        report.record(
            (outbox?.takeUnkept() ?? []).filter { !named.contains(StoreKey("\($0.error.provider ?? "")/\($0.key)")) })
        if report.status == .ok, report.failureCount > 0 { report.status = .failed }
        return report.entry
    }

    /// Ends the job `error` before it starts when a provider it needs is missing or unavailable.
    ///
    /// That is a provider it reads or writes that could not be opened, or one it names that is unavailable (signed
    /// out, offline, misconfigured): the job could not do its work, whichever side is missing. A sync is the
    /// exception: it leaves an unavailable provider out and syncs the others, and says so; and a job on the whole
    /// store goes through the store, which fails over and queues.
    private func checkProviders(of job: JobSpec) async throws(CloudSyncError) {
        let needed = job.job.providers(store: compiled.spec.store.providers)
        if let missing = needed.compactMap({ unopened[$0] }).first { throw missing }
        for id in job.job.availabilityChecked {
            let availability = try await store.availability(of: id)
            guard let reason = availability.reason else { continue }
            throw CloudSyncError(
                reason.errorCode,
                "provider \(id) of pipeline \(compiled.spec.name) is unavailable (\(availability)), so job "
                    + "\(job.name) did nothing", provider: id)
        }
    }
}
