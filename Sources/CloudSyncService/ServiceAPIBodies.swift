import CloudSyncPipeline
import CloudSyncRunner
import Foundation

// What the JSON endpoints answer; `schemas/serve-api.schema.json` describes each (see ServiceAPISchemaTests).

/// `GET /api/pipelines`.
struct PipelinesBody: Encodable {
    struct Pipeline: Encodable {
        struct Running: Encodable {
            let since: String
            let trigger: String
        }
        struct LastRun: Encodable {
            let id: String
            let status: String
            let startedAt: String
            let finishedAt: String
            let durationMs: Int64
            let report: String
            /// Why it did not end `ok`: the first cause a person reads, then every job that failed or errored.
            let error: RunDiagnosis.Cause?
            let failedJobs: [RunDiagnosis.JobProblem]?
        }
        struct Held: Encodable {
            let job: String
            let message: String
            let approve: String
        }
        struct Flushes: Encodable {
            let every: String
            let runs: Int
            let drained: Int
            let dropped: Int
            let failures: Int
            let lastAt: String?
        }

        let name: String
        let file: String
        let schedule: String?
        let nextRunAt: String?
        let running: Running?
        let flushing: Bool
        let error: String?
        let lastRun: LastRun?
        let runs: [String: Int]
        let skippedSlots: [String: Int]
        let scheduleLagSeconds: Double?
        let lastRefusal: String?
        let outboxPending: [String: Int]
        let autoFlush: Flushes?
        let sharedState: Bool
        /// Present when the last run was held back by a job's `maxDeletes`: how to approve it once.
        let held: Held?

        init(_ status: PipelineStatus) {
            name = status.name
            file = status.file
            schedule = status.schedule?.description
            nextRunAt = status.nextRun.map { ReportTime.string($0.start) }
            running = status.running.map { Running(since: ReportTime.string($0.since), trigger: $0.trigger.rawValue) }
            flushing = status.flushing
            error = status.loadError
            let diagnosis = status.recent.last.flatMap(RunDiagnosis.init)
            lastRun = status.recent.last.map {
                LastRun(
                    id: $0.runId, status: $0.status.rawValue, startedAt: $0.startedAt, finishedAt: $0.finishedAt,
                    durationMs: $0.durationMs, report: "/api/runs/" + $0.runId, error: diagnosis?.headline,
                    failedJobs: diagnosis.map(\.jobs))
            }
            held = diagnosis?.hold.map {
                Held(job: $0.job, message: $0.message, approve: ServiceAPI.approval(for: status.name))
            }
            runs = Dictionary(uniqueKeysWithValues: status.runsByStatus.map { ($0.key.rawValue, $0.value) })
            skippedSlots = Dictionary(uniqueKeysWithValues: status.skippedSlots.map { ($0.key.rawValue, $0.value) })
            scheduleLagSeconds = status.lastLagSeconds
            lastRefusal = status.lastRefusal
            outboxPending = status.outboxPending
            autoFlush = status.autoFlushMs.map {
                Flushes(
                    every: DurationText.format(milliseconds: $0), runs: status.flushes.runs,
                    drained: status.flushes.drained, dropped: status.flushes.dropped,
                    failures: status.flushes.failures, lastAt: status.flushes.lastAt.map(ReportTime.string))
            }
            sharedState = status.stateIsShared
        }
    }
    struct FailedFile: Encodable {
        let file: String
        let error: String
    }

    let startedAt: String
    let pipelines: [Pipeline]
    let failedFiles: [FailedFile]

    init(_ service: PipelineService) {
        startedAt = ReportTime.string(service.startedAt)
        pipelines = service.pipelines.map(Pipeline.init)
        failedFiles = service.failedFiles.sorted { $0.key < $1.key }.map { FailedFile(file: $0.key, error: $0.value) }
    }
}

/// `GET /api/runs`.
struct RunsBody: Encodable {
    let runs: [RunLine]
    /// Pipelines whose history could not be read, with why.
    let errors: [String: String]
}

/// One run in `GET /api/runs`.
struct RunLine: Encodable {
    let pipeline: String
    let id: String
    let status: String
    let dryRun: Bool
    let startedAt: String
    let finishedAt: String
    let jobs: [String: Int]
    /// Where the report can be fetched.
    let report: String
    /// Where the runner wrote it; nil when it went to standard output.
    let reportPath: String?

    init(_ served: ServedRun) {
        pipeline = served.pipeline
        id = served.run.id
        status = served.run.status.rawValue
        dryRun = served.run.dryRun
        startedAt = served.run.startedAt
        finishedAt = served.run.finishedAt
        jobs = served.run.jobs
        report = "/api/runs/" + served.run.id
        reportPath = served.run.report
    }
}
