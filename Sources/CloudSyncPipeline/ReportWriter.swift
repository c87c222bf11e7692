import CloudSync
import CloudSyncLocal
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
        let pipeline = "pipeline=\(quoted(report.pipeline))"
        var lines: [String] = []
        func metric(_ name: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            lines += ["# HELP \(name) \(help)", "# TYPE \(name) gauge"]
            lines += samples.map { "\(name){\($0.labels)} \($0.value)" }
        }
        let finished = (ISO8601DateFormatter.withFractions.date(from: report.finishedAt)?.timeIntervalSince1970) ?? 0
        metric(
            "cloudsync_last_run_timestamp_seconds", "When the last run of the pipeline finished, in Unix time.",
            [(pipeline, String(format: "%.3f", finished))])
        metric(
            "cloudsync_last_run_duration_seconds", "How long the last run took.",
            [(pipeline, String(format: "%.3f", Double(report.durationMs) / 1000))])
        metric(
            "cloudsync_last_run_status", "How the last run ended: 1 for its status, 0 for the others.",
            RunStatus.allCases.map { ("\(pipeline),status=\(quoted($0.rawValue))", $0 == report.status ? "1" : "0") })
        metric(
            "cloudsync_last_run_job_status", "How each job of the last run ended: 1 for its status, 0 for the others.",
            report.jobs.flatMap { job in
                JobStatus.allCases.map { status in
                    (
                        "\(pipeline),job=\(quoted(job.name)),type=\(quoted(job.type)),status=\(quoted(status.rawValue))",
                        job.status == status ? "1" : "0"
                    )
                }
            })
        metric(
            "cloudsync_last_run_job_count", "The counts each job of the last run reported (copied, failed, ...).",
            report.jobs.flatMap { job in
                job.counts.sorted { $0.key < $1.key }.map { count in
                    (
                        "\(pipeline),job=\(quoted(job.name)),type=\(quoted(job.type)),count=\(quoted(count.key))",
                        "\(count.value)"
                    )
                }
            })
        metric(
            "cloudsync_outbox_pending", "Writes waiting in the outbox after the last run.",
            [(pipeline, "\(report.outbox.pendingAfter)")])
        return lines.joined(separator: "\n") + "\n"
    }

    /// A label value in double quotes, with backslash, quote and newline escaped as the format requires.
    static func quoted(_ value: String) -> String {
        "\""
            + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}

extension ISO8601DateFormatter {
    /// Reads the report's times (UTC, with milliseconds).
    static var withFractions: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
