import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import Foundation

/// Puts a run's report where the pipeline and the command line say: the report file, the stable `latest` copy, the
/// pruning of old reports, and the Prometheus textfile.
struct ReportWriter {
    let spec: PipelineSpec
    /// `--report`: a path, `-` for standard output, or nil for the file's own.
    let override: String?
    /// Write the report alone: no `latest`, textfile or pruning (dry runs, and runs refused because another holds
    /// the lock, so they never replace what that run leaves).
    let reportOnly: Bool

    /// The pattern of report paths: `--report`, else the file's, else `<state>/reports/`; nil for standard output,
    /// which is also where a pipeline whose state is in PostgreSQL reports when neither names a path (it keeps
    /// nothing on the machine it ran on).
    private var pattern: String? {
        if override == "-" { return nil }
        if let override { return resolvePath(override, against: FileManager.default.currentDirectoryPath) }
        if let path = spec.reportPath { return path }
        return spec.sharedState == nil ? spec.state + "/reports/{name}-{startedAt}.json" : nil
    }

    /// The report's path for a run that started at `startedAt`; nil for standard output.
    func path(startedAt: String) -> String? {
        pattern.map { fill($0, startedAt: startedAt.replacingOccurrences(of: ":", with: "-")) }
    }

    private func fill(_ pattern: String, startedAt: String) -> String {
        pattern.replacingOccurrences(of: "{name}", with: spec.name).replacingOccurrences(
            of: "{startedAt}", with: startedAt)
    }

    /// Writes the report and what goes with it; returns where the report went (nil: standard output).
    ///
    /// With ``reportOnly`` only the report is written: `latest`, the textfile and the pruning describe real runs.
    func write(_ report: RunReport) throws(CloudSyncError) -> String? {
        let path = path(startedAt: report.startedAt)
        let json = report.json()
        if let path { try Self.replace(path, with: json, what: "the report") }
        guard !reportOnly else { return path }
        if let latest = spec.reportLatest { try Self.replace(latest, with: json, what: "the latest report") }
        if let path, let keep = spec.reportKeep, let pattern { prune(keeping: keep, like: pattern, beside: path) }
        if let metrics = spec.reportMetrics {
            try Self.replace(metrics, with: PrometheusTextfile.render(report), what: "the metrics textfile")
        }
        return path
    }

    /// Deletes the oldest reports the pattern names in the report's directory, keeping the newest `keep`.
    private func prune(keeping keep: Int, like pattern: String, beside path: String) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = fill((pattern as NSString).lastPathComponent, startedAt: "*")
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        // Timestamps are ISO-8601, so names sort by time.
        let reports = files.filter { globMatches(name, $0) }.sorted()
        for old in reports.dropLast(keep) { try? FileManager.default.removeItem(atPath: directory + "/" + old) }
    }

    /// Writes `text` to `path` as ``OutputFile`` writes: a regular file is replaced atomically (a reader sees the
    /// old or the new one), a device or FIFO such as `/dev/null` is written in place, a directory is refused.
    static func replace(_ path: String, with text: String, what: String) throws(CloudSyncError) {
        try OutputFile.write(text, to: path, what: what)
    }
}

/// The last run as a Prometheus text exposition, for node_exporter's textfile collector: when it ran, how it ended,
/// how long it took, every job's counts and status, and what waits in the outbox.
enum PrometheusTextfile {
    static func render(_ report: RunReport) -> String {
        var metrics = PrometheusExposition()
        report.addLastRun(to: &metrics, prefix: "cloudsync_last_run", counts: "cloudsync_last_run_job_count")
        metrics.add(
            "cloudsync_outbox_pending", .gauge, help: "Writes waiting in the outbox after the last run.",
            labels: ["pipeline": report.pipeline], value: Double(report.outbox.pendingAfter))
        return metrics.text
    }
}

extension RunReport {
    /// Adds what this run says as the pipeline's last run: `PREFIX_timestamp_seconds`, `_duration_seconds`,
    /// `_status` (1 for its status, 0 for the others), `_job_status` and the jobs' counts as `counts`, labelled with
    /// the pipeline.
    public func addLastRun(to metrics: inout PrometheusExposition, prefix: String, counts: String) {
        let finished = ReportTime.date(finishedAt)?.timeIntervalSince1970 ?? 0
        metrics.add(
            "\(prefix)_timestamp_seconds", .gauge, help: "When the last run of the pipeline finished, in Unix time.",
            labels: ["pipeline": pipeline], value: finished)
        metrics.add(
            "\(prefix)_duration_seconds", .gauge, help: "How long the last run took.", labels: ["pipeline": pipeline],
            value: Double(durationMs) / 1000)
        for status in RunStatus.allCases {
            metrics.add(
                "\(prefix)_status", .gauge, help: "How the last run ended: 1 for its status, 0 for the others.",
                labels: ["pipeline": pipeline, "status": status.rawValue], value: status == self.status ? 1 : 0)
        }
        for job in jobs {
            for status in JobStatus.allCases {
                metrics.add(
                    "\(prefix)_job_status", .gauge,
                    help: "How each job of the last run ended: 1 for its status, 0 for the others.",
                    labels: ["pipeline": pipeline, "job": job.name, "type": job.type, "status": status.rawValue],
                    value: job.status == status ? 1 : 0)
            }
        }
        for job in jobs {
            for count in job.counts.sorted(by: { $0.key < $1.key }) {
                metrics.add(
                    counts, .gauge,
                    help: "The counts each job of the last run reported (copied, failed, ...).",
                    labels: ["pipeline": pipeline, "job": job.name, "type": job.type, "count": count.key],
                    value: Double(count.value))
            }
        }
    }
}
