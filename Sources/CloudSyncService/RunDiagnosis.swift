import CloudSyncPipeline
import CloudSyncRunner

/// Why a run did not end `ok`, read from its report for the page and `/api/pipelines`: what stopped it from
/// starting, each job that failed or could not run with its code and message and its first failed keys, and whether
/// a `maxDeletes` limit holds it for approval.
struct RunDiagnosis: Sendable {
    /// How many failed keys of a job are shown; the report lists up to 100.
    static let keysShown = 5

    /// A job that did not end `ok` (skipped jobs are left out: their cause is another job).
    struct JobProblem: Sendable, Encodable {
        let job: String
        let type: String
        let status: String
        /// Why the job could not run (status `error`), or why a sync deleted nothing.
        let error: Cause?
        /// Its first failed keys, in the order they failed.
        let failedKeys: [FailedKey]
        /// Failed keys beyond those shown.
        let failedKeysOmitted: Int
        /// Its counts that are not zero (what a `check` found, what a held sync held back).
        let counts: [String: Int]
    }

    struct Cause: Sendable, Encodable {
        let code: String
        let message: String
    }

    struct FailedKey: Sendable, Encodable {
        let key: String
        let provider: String?
        let code: String
        let message: String
    }

    /// A job held back by its `maxDeletes`: the run deleted nothing and waits for approval.
    struct Hold: Sendable, Encodable {
        let job: String
        let message: String
    }

    /// Why the run could not start at all.
    let runError: Cause?
    let jobs: [JobProblem]
    let hold: Hold?

    /// Nil for a run that ended `ok` (or was only interrupted): nothing to explain.
    init?(_ report: RunReport) {
        let problems = report.jobs.filter { $0.status == .failed || $0.status == .error }
        guard report.error != nil || !problems.isEmpty else { return nil }
        runError = report.error.map { Cause(code: $0.code, message: $0.message) }
        jobs = problems.map { job in
            JobProblem(
                job: job.name, type: job.type, status: job.status.rawValue,
                error: job.error.map { Cause(code: $0.code, message: $0.message) },
                failedKeys: job.failures.prefix(Self.keysShown).map {
                    FailedKey(key: $0.key, provider: $0.provider, code: $0.code, message: $0.message)
                },
                failedKeysOmitted: max(0, job.failures.count - Self.keysShown) + job.failuresOmitted,
                counts: job.counts.filter { $0.value != 0 })
        }
        hold =
            report.dryRun
            ? nil
            : report.jobs.lazy.compactMap { job in
                job.error.flatMap { $0.code == "ERR_TOO_MANY_DELETES" ? Hold(job: job.name, message: $0.message) : nil }
            }.first
    }

    /// The one line a person reads first: the run's own error, else the first job's.
    var headline: Cause? {
        if let runError { return runError }
        guard let first = jobs.first else { return nil }
        if let error = first.error { return error }
        if let key = first.failedKeys.first {
            let more = first.failedKeys.count - 1 + first.failedKeysOmitted
            return Cause(
                code: key.code,
                message: "\(first.job): key '\(key.key)' failed: \(key.message)"
                    + (more > 0 ? " (and \(more) more)" : ""))
        }
        let counts = first.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        return Cause(
            code: first.status,
            message: "\(first.job) (\(first.type)) ended \(first.status)"
                + (counts.isEmpty ? "" : ": " + counts.joined(separator: ", ")))
    }
}
