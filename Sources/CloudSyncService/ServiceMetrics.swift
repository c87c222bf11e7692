import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `GET /metrics`: the Prometheus text exposition of every served pipeline — its last run (as the textfile writes
/// it), runs and skipped slots since the service started, schedule lag, next slot, outbox depth by provider, flushes —
/// and of every provider's requests, bytes, retries and throttled answers over those runs.
enum ServiceMetrics {
    static func render(
        _ pipelines: [PipelineStatus], failedFiles: [String: String], startedAt: Date,
        listener: HTTPListenerCounters? = nil
    ) -> String {
        var metrics = PrometheusExposition()
        if let listener { addListener(listener, to: &metrics) }
        metrics.add(
            "cloudsync_serve_start_time_seconds", .gauge, help: "When the service started, in Unix time.",
            value: startedAt.timeIntervalSince1970)
        metrics.add(
            "cloudsync_serve_files_failed", .gauge,
            help: "Pipeline files that did not load at the last (re)load and have no earlier version running.",
            value: Double(failedFiles.count))
        for pipeline in pipelines {
            addState(of: pipeline, to: &metrics)
            addOutbox(of: pipeline, to: &metrics)
            if let last = pipeline.recent.last {
                // Not `_job_count`: promtool keeps that suffix for histograms and summaries.
                last.addLastRun(
                    to: &metrics, prefix: "cloudsync_pipeline_last_run",
                    counts: "cloudsync_pipeline_last_run_job_result")
            }
            for (provider, totals) in pipeline.providerTotals.sorted(by: { $0.key < $1.key }) {
                for (family, help, total) in providerFamilies {
                    metrics.add(
                        family, .counter, help: help, labels: ["pipeline": pipeline.name, "provider": provider],
                        value: Double(totals[keyPath: total]))
                }
            }
        }
        return metrics.text
    }

    /// The HTTP listener's connections, requests answered and refused, and heads that came too slowly.
    private static func addListener(_ listener: HTTPListenerCounters, to metrics: inout PrometheusExposition) {
        metrics.add(
            "cloudsync_serve_http_connections", .gauge, help: "HTTP connections open now.",
            value: Double(listener.openConnections))
        metrics.add(
            "cloudsync_serve_http_requests_total", .counter,
            help: "Requests answered by the endpoints since the service started.",
            value: Double(listener.requestsAnswered))
        let refused = listener.refusedByStatus
        for status in refused.keys.sorted() {
            metrics.add(
                "cloudsync_serve_http_refused_total", .counter,
                help: "Requests refused on their head (a limit, overload, a missing token), by status.",
                labels: ["status": String(status)], value: Double(refused[status]!))
        }
        metrics.add(
            "cloudsync_serve_http_head_timeouts_total", .counter,
            help: "Connections closed because a whole request head did not arrive within --head-timeout.",
            value: Double(listener.headDeadlineCloses))
    }

    /// A pipeline's state: whether its file loaded and a run is under way, its schedule (next slot, last lag), its
    /// runs by how they ended and its slots skipped by why.
    private static func addState(of pipeline: PipelineStatus, to metrics: inout PrometheusExposition) {
        let name = pipeline.name
        metrics.add(
            "cloudsync_pipeline_config_error", .gauge,
            help: "1 when the pipeline's file did not load at the last reload (its previous version runs), else 0.",
            labels: ["pipeline": name], value: pipeline.loadError == nil ? 0 : 1)
        metrics.add(
            "cloudsync_pipeline_running", .gauge, help: "1 while a run of the pipeline is in progress, else 0.",
            labels: ["pipeline": name], value: pipeline.running == nil ? 0 : 1)
        if let next = pipeline.nextRun {
            metrics.add(
                "cloudsync_pipeline_next_run_timestamp_seconds", .gauge,
                help: "When the pipeline's next scheduled run starts, in Unix time.", labels: ["pipeline": name],
                value: next.start.timeIntervalSince1970)
        }
        if let lag = pipeline.lastLagSeconds {
            metrics.add(
                "cloudsync_pipeline_schedule_lag_seconds", .gauge,
                help: "How long after its slot the last scheduled run started (jitter included).",
                labels: ["pipeline": name], value: lag)
        }
        for status in RunStatus.allCases {
            metrics.add(
                "cloudsync_pipeline_runs_total", .counter,
                help: "Runs since the service started, by how they ended.",
                labels: ["pipeline": name, "status": status.rawValue],
                value: Double(pipeline.runsByStatus[status] ?? 0))
        }
        for reason in SkipReason.allCases {
            metrics.add(
                "cloudsync_pipeline_slots_skipped_total", .counter,
                help: "Slots that did not run since the service started, by why: the previous run still ran "
                    + "(running), another process held the lock (locked), the run could not start (cannotStart), another host "
                    + "sharing the state claimed it (claimedElsewhere).",
                labels: ["pipeline": name, "reason": reason.rawValue],
                value: Double(pipeline.skippedSlots[reason] ?? 0))
        }
    }

    /// A pipeline's outbox: writes waiting by provider, and the flushes between runs.
    private static func addOutbox(of pipeline: PipelineStatus, to metrics: inout PrometheusExposition) {
        let name = pipeline.name
        for (provider, count) in pipeline.outboxPending.sorted(by: { $0.key < $1.key }) {
            metrics.add(
                "cloudsync_pipeline_outbox_pending", .gauge,
                help:
                    "Writes waiting in the outbox, by the provider they wait for, as the last run or flush left it.",
                labels: ["pipeline": name, "provider": provider], value: Double(count))
        }
        metrics.add(
            "cloudsync_pipeline_outbox_flushes_total", .counter,
            help: "Outbox flushes between runs (autoFlush) since the service started.", labels: ["pipeline": name],
            value: Double(pipeline.flushes.runs))
        metrics.add(
            "cloudsync_pipeline_outbox_flushed_total", .counter,
            help: "Queued writes delivered by the flushes between runs since the service started.",
            labels: ["pipeline": name], value: Double(pipeline.flushes.drained))
        metrics.add(
            "cloudsync_pipeline_outbox_flush_failures_total", .counter,
            help: "Flushes between runs that could not open the pipeline or failed.", labels: ["pipeline": name],
            value: Double(pipeline.flushes.failures))
    }

    /// What each provider cost the runs since the service started: name, help, and the total it reads.
    private static let providerFamilies: [(String, String, KeyPath<ProviderTotals, Int> & Sendable)] = [
        ("cloudsync_provider_requests_total", "Provider calls made by the runs since start.", \.requests),
        ("cloudsync_provider_read_bytes_total", "Bytes read from the provider by the runs.", \.bytesRead),
        ("cloudsync_provider_written_bytes_total", "Bytes written to the provider by the runs.", \.bytesWritten),
        ("cloudsync_provider_retries_total", "Calls to the provider retried by the runs.", \.retries),
        (
            "cloudsync_provider_throttled_total", "Answers from the provider that asked the runs to slow down.",
            \.throttled
        ),
    ]
}
