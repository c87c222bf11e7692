import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `GET /`: one self-contained HTML page (no script, no external asset) that reloads itself every 10 s: every
/// pipeline with its next run, its last runs as a strip of status cells linking to their reports, duration and
/// keys-moved charts over the last 50 runs drawn as inline SVG, and what waits in its outbox.
///
/// Elements carry `data-` attributes (pipeline, status, chart) so a browser test can read the page as a person sees it.
enum StatusPage {
    /// Counts that say a key was changed somewhere, summed into the keys-moved chart.
    static let movedCounts: Set<String> = [
        "copied", "updated", "deleted", "repaired", "restored", "removed", "new", "moved", "imported", "rekeyed",
        "drained",
    ]

    static func render(_ pipelines: [PipelineStatus], failedFiles: [String: String], now: Date) -> String {
        var html = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta http-equiv="refresh" content="10">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>cloudsync serve</title>
            <style>\(style)</style>
            </head>
            <body>
            <header><h1>cloudsync serve</h1><p>\(pipelines.count) pipeline\(pipelines.count == 1 ? "" : "s") \
            · as of <time datetime="\(ReportTime.string(now))">\(escape(ReportTime.string(now)))</time> · <a href="/metrics">metrics</a> \
            · <a href="/api/pipelines">API</a></p></header>
            <main>

            """
        for (file, error) in failedFiles.sorted(by: { $0.key < $1.key }) {
            html += """
                <section class="failed-file" data-file="\(escape(file))"><h2>\(escape(file))</h2>\
                <p class="error">did not load; nothing runs from it</p><pre>\(escape(error))</pre></section>

                """
        }
        if pipelines.isEmpty && failedFiles.isEmpty { html += "<p>No pipeline is served.</p>\n" }
        for pipeline in pipelines { html += section(pipeline, now: now) }
        html += "</main>\n</body>\n</html>\n"
        return html
    }

    private static func section(_ pipeline: PipelineStatus, now: Date) -> String {
        let last = pipeline.recent.last
        let state =
            pipeline.running != nil ? "running" : pipeline.flushing ? "flushing" : last?.status.rawValue ?? "never run"
        var html = """
            <section class="pipeline" data-pipeline="\(escape(pipeline.name))" data-status="\(escape(state))">
            <h2><span class="badge \(escape(state.replacingOccurrences(of: " ", with: "-")))">\(escape(state))</span> \
            \(escape(pipeline.name))</h2>
            <dl>
            <dt>File</dt><dd>\(escape(pipeline.file))</dd>
            <dt>Schedule</dt><dd>\(escape(pipeline.schedule?.description ?? "none: runs when asked"))</dd>
            <dt>Next run</dt><dd data-next-run>\(pipeline.nextRun.map { timeCell($0.start, now: now) } ?? "—")</dd>

            """
        if let running = pipeline.running {
            html +=
                "<dt>Running</dt><dd>since \(timeCell(running.since, now: now)) (\(running.trigger.rawValue))</dd>\n"
        }
        if let last {
            html += """
                <dt>Last run</dt><dd><a href="/api/runs/\(escape(last.runId))">\(escape(last.status.rawValue))</a> \
                at \(escape(last.startedAt)) in \(seconds(last.durationMs))</dd>

                """
        }
        let diagnosis = last.flatMap(RunDiagnosis.init)
        let pending = pipeline.outboxPending.values.reduce(0, +)
        let byProvider = pipeline.outboxPending.sorted { $0.key < $1.key }.map { "\($0.value) for \($0.key)" }
        var outbox = pending == 0 ? "empty" : "\(pending) waiting: " + escape(byProvider.joined(separator: ", "))
        if let every = pipeline.autoFlushMs { outbox += ", flushed every " + DurationText.format(milliseconds: every) }
        html += "<dt>Outbox</dt><dd data-outbox=\"\(pending)\">\(outbox)</dd>\n</dl>\n"
        if let error = pipeline.loadError {
            html += """
                <div class="error" data-load-error><p>The file did not load at the last reload; the version before it \
                keeps running.</p><pre>\(escape(error))</pre></div>

                """
        }
        if let diagnosis { html += why(diagnosis, pipeline: pipeline.name, report: last!.runId) }
        if let refusal = pipeline.lastRefusal {
            html += "<p class=\"error\">The last slot did not run: \(escape(refusal))</p>\n"
        }
        html += strip(pipeline.recent)
        if pipeline.recent.isEmpty {
            html += "<p>No run yet.</p>\n"
        } else {
            html += chart(
                "duration", "Duration (s)", pipeline.recent.map { Double($0.durationMs) / 1000 }, pipeline.recent)
            html += chart("keys-moved", "Keys moved", pipeline.recent.map { Double(keysMoved($0)) }, pipeline.recent)
        }
        return html + "</section>\n"
    }

    /// Why the last run did not end `ok`: its headline, each job that failed with its first keys, and, for a run
    /// held by `maxDeletes`, how to approve it.
    private static func why(_ diagnosis: RunDiagnosis, pipeline: String, report: String) -> String {
        var html = "<div class=\"why\" data-why>\n"
        if let headline = diagnosis.headline {
            html +=
                "<p class=\"error\" data-error-code=\"\(escape(headline.code))\"><strong>\(escape(headline.code))</strong> "
                + "\(escape(headline.message))</p>\n"
        }
        if let hold = diagnosis.hold {
            html += """
                <div class="held" data-held="\(escape(hold.job))"><p><strong>Held for approval:</strong> \
                \(escape(hold.job)) deleted nothing, as its maxDeletes asks. If the deletions are wanted, approve this \
                once with the service's token:</p><pre>\(escape(ServiceAPI.approvalCommand(for: pipeline)))</pre>\
                <p>or run <code>cloudsync run FILE --force</code> by hand.</p></div>

                """
        }
        // One job whose whole story is the headline needs no list.
        if diagnosis.jobs.count == 1, diagnosis.runError == nil, diagnosis.jobs[0].failedKeys.isEmpty {
            return html + "</div>\n"
        }
        html += "<ul class=\"problems\">"
        for job in diagnosis.jobs {
            html +=
                "<li data-job=\"\(escape(job.job))\" data-status=\"\(escape(job.status))\"><strong>\(escape(job.job))</strong> "
                + "(\(escape(job.type))) \(escape(job.status))"
            if let error = job.error { html += ": <code>\(escape(error.code))</code> \(escape(error.message))" }
            let counts = job.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
            if !counts.isEmpty { html += " <span class=\"counts\">(\(escape(counts.joined(separator: ", "))))</span>" }
            if !job.failedKeys.isEmpty {
                html += "<ul>"
                for key in job.failedKeys {
                    html +=
                        "<li data-failed-key=\"\(escape(key.key))\"><code>\(escape(key.key))</code>"
                        + (key.provider.map { " at \(escape($0))" } ?? "")
                        + ": <code>\(escape(key.code))</code> \(escape(key.message))</li>"
                }
                if job.failedKeysOmitted > 0 {
                    html +=
                        "<li>and \(job.failedKeysOmitted) more in <a href=\"/api/runs/\(escape(report))\">the report</a></li>"
                }
                html += "</ul>"
            }
            html += "</li>"
        }
        return html + "</ul></div>\n"
    }

    /// The last runs, oldest first, as cells coloured by status, each linking to its report.
    private static func strip(_ reports: [RunReport]) -> String {
        guard !reports.isEmpty else { return "" }
        var html = "<ol class=\"strip\" aria-label=\"last runs, oldest first\">"
        for report in reports {
            let label = "\(report.startedAt): \(report.status.rawValue) in \(seconds(report.durationMs))"
            html +=
                "<li><a class=\"run \(report.status.rawValue)\" data-run=\"\(escape(report.runId))\" "
                + "data-status=\"\(report.status.rawValue)\" href=\"/api/runs/\(escape(report.runId))\" "
                + "title=\"\(escape(label))\"><span>\(escape(label))</span></a></li>"
        }
        return html + "</ol>\n"
    }

    /// A bar chart of `values` (one bar per run, oldest left), its largest value labelled.
    private static func chart(_ kind: String, _ title: String, _ values: [Double], _ reports: [RunReport]) -> String {
        let width = 500.0
        let height = 80.0
        let largest = values.max() ?? 0
        let top = max(largest, 0.001)
        let slot = width / Double(max(values.count, 1))
        var svg = """
            <figure><figcaption>\(escape(title)), last \(values.count) runs; most \(format(largest))</figcaption>
            <svg class="chart" data-chart="\(kind)" viewBox="0 0 \(Int(width)) \(Int(height))" width="\(Int(width))" \
            height="\(Int(height))" role="img" aria-label="\(escape(title))">
            <line x1="0" y1="\(height - 0.5)" x2="\(width)" y2="\(height - 0.5)" class="axis"/>

            """
        for (index, value) in values.enumerated() {
            let barHeight = max(value / top * (height - 4), value > 0 ? 1 : 0)
            let x = Double(index) * slot + 1
            svg +=
                "<rect x=\"\(format(x))\" y=\"\(format(height - barHeight))\" width=\"\(format(max(slot - 2, 1)))\" "
                + "height=\"\(format(barHeight))\" class=\"\(reports[index].status.rawValue)\">"
                + "<title>\(escape(reports[index].startedAt)): \(format(value))</title></rect>\n"
        }
        return svg + "</svg></figure>\n"
    }

    /// Keys a run changed somewhere: the sum of its jobs' change counts.
    static func keysMoved(_ report: RunReport) -> Int {
        report.jobs.reduce(0) { sum, job in
            sum + job.counts.filter { movedCounts.contains($0.key) }.values.reduce(0, +)
        }
    }

    private static func timeCell(_ date: Date, now: Date) -> String {
        let delta = date.timeIntervalSince(now)
        let relative =
            abs(delta) < 1 ? "now" : delta > 0 ? "in \(span(delta))" : "\(span(-delta)) ago"
        return "<time datetime=\"\(ReportTime.string(date))\" title=\"\(ReportTime.string(date))\">\(relative)</time>"
    }

    private static func span(_ seconds: Double) -> String {
        DurationText.format(milliseconds: Int64(seconds.rounded()) * 1000)
    }

    private static func seconds(_ milliseconds: Int64) -> String {
        String(format: "%.1f s", Double(milliseconds) / 1000)
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(format: "%.2f", value)
    }

    /// Text safe in HTML content and attribute values.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    private static let style = """
        body{font:15px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1c1e21}\
        header{background:#1c2733;color:#fff;padding:.6em 1.2em}header h1{margin:0;font-size:1.3em}\
        header p{margin:.2em 0 0;color:#c9d1d9}header a{color:#9ecbff}main{padding:1em;display:grid;gap:1em}\
        section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:.8em 1.2em}\
        h2{margin:.1em 0 .5em;font-size:1.15em}dl{display:grid;grid-template-columns:8em 1fr;margin:0;gap:.15em 1em}\
        dt{color:#57606a}dd{margin:0}.badge{border-radius:4px;padding:.05em .5em;color:#fff;background:#6e7781;\
        font-size:.85em}.badge.ok{background:#1a7f37}.badge.failed,.badge.error{background:#cf222e}\
        .badge.queued{background:#9a6700}.badge.interrupted{background:#8250df}.badge.running,\
        .badge.flushing{background:#0969da}.error{color:#cf222e}pre{white-space:pre-wrap;background:#f6f8fa;\
        padding:.5em;overflow:auto}.strip{list-style:none;display:flex;gap:2px;padding:0;margin:.8em 0}\
        .strip a{display:block;width:12px;height:22px;border-radius:2px;background:#6e7781}\
        .strip span{position:absolute;left:-9999px}a.ok,rect.ok{background:#1a7f37;fill:#1a7f37}\
        a.failed,a.error,rect.failed,rect.error{background:#cf222e;fill:#cf222e}a.queued,rect.queued{\
        background:#bf8700;fill:#bf8700}a.interrupted,rect.interrupted{background:#8250df;fill:#8250df}\
        figure{margin:.6em 0}figcaption{color:#57606a;font-size:.9em}svg{max-width:100%;height:auto}\
        .axis{stroke:#d0d7de}.why{border-left:3px solid #cf222e;padding:.2em .8em;margin:.6em 0}\
        .why ul{margin:.3em 0;padding-left:1.2em}.held{background:#fff8c5;border:1px solid #d4a72c;\
        border-radius:4px;padding:.2em .8em;margin:.4em 0}
        """
}
