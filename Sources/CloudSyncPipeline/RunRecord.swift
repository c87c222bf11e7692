import CloudSync

/// One past run of a pipeline, as its state keeps it for `cloudsync history`.
public struct RunRecord: Sendable, Equatable, Codable {
    /// The run's id, as in its report (`<pipeline>-<start in ms>-<pid>`).
    public var id: String
    /// When the run started, ISO 8601 in UTC.
    public var startedAt: String
    /// When the run ended, ISO 8601 in UTC.
    public var finishedAt: String
    /// How the run ended.
    public var status: RunStatus
    /// Whether it was a dry run.
    public var dryRun: Bool
    /// Jobs by status, for a one-line summary.
    public var jobs: [String: Int]
    /// Where the report went; nil when it went to standard output.
    public var report: String?

    /// A record of a run with these facts.
    public init(
        id: String, startedAt: String, finishedAt: String, status: RunStatus, dryRun: Bool, jobs: [String: Int],
        report: String?
    ) {
        self.id = id
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.status = status
        self.dryRun = dryRun
        self.jobs = jobs
        self.report = report
    }
}
