import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import Foundation

extension CommandLineTool {
    /// `cloudsync run FILE [--job NAME]...
    ///
    /// [--dry-run] [--report PATH|-] [--yes] [--quiet] [--progress MODE]`
    func runPipeline(_ arguments: [String]) async -> ExitCode {
        var options = RunOptions()
        var file: String?
        var quiet = false
        var progress = "auto"
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            func value() -> String? {
                index += 1
                return index < arguments.count ? arguments[index] : nil
            }
            switch argument {
            case "--job":
                guard let name = value() else { return usageError("--job needs a job name") }
                options.jobNames.append(name)
            case "--report":
                guard let path = value() else { return usageError("--report needs a path, or - for standard output") }
                options.reportPath = path
            case "--dry-run": options.dryRun = true
            case "--yes": options.yes = true
            case "--quiet": quiet = true
            case "--progress":
                guard let mode = value(), ["auto", "always", "never"].contains(mode) else {
                    return usageError("--progress takes auto, always or never")
                }
                progress = mode
            default:
                guard !argument.hasPrefix("-") else { return usageError("unknown option '\(argument)'") }
                guard file == nil else { return usageError("run takes one pipeline file") }
                file = argument
            }
            index += 1
        }
        guard let file else { return usageError("run needs a pipeline file") }
        guard let compiled = compile(file) else { return .usage }
        let unknownJobs = options.jobNames.filter { name in !compiled.spec.jobs.contains { $0.name == name } }
        guard unknownJobs.isEmpty else {
            return usageError(
                "no job named \(unknownJobs.joined(separator: ", ")) in \(file); its jobs: "
                    + compiled.spec.jobs.map(\.name).joined(separator: ", "))
        }

        let showProgress = !quiet && (progress == "always" || (progress == "auto" && isatty(STDERR_FILENO) == 1))
        let errorWriter = standardError
        let total = options.jobNames.isEmpty ? compiled.spec.jobs.count : options.jobNames.count
        let finished = Protected(0)
        if !quiet {
            options.onJobFinished = { job in
                let done = finished.withLock { count in
                    count += 1
                    return count
                }
                let counts = job.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                    separator: ", ")
                let place = showProgress ? "[\(done)/\(total)] " : ""
                var line = "\(place)\(job.name) (\(job.type)): \(job.status)"
                if !counts.isEmpty { line += " — \(counts)" }
                if let error = job.error { line += " — \(error.code): \(error.message)" }
                errorWriter(line + "\n")
            }
        }
        if showProgress {
            // On a terminal the line is redrawn in place; with NO_COLOR set it is plain text, a line at a time.
            let plain = environment["NO_COLOR"] != nil
            let meter = Protected<(job: String, started: ContinuousClock.Instant, drawn: ContinuousClock.Instant?)>(
                ("", .now, nil))
            options.onProgress = { job, done, total in
                let now = ContinuousClock.now
                let (started, due) = meter.withLock { state -> (ContinuousClock.Instant, Bool) in
                    state.job = job
                    let interval: Duration = plain ? .seconds(1) : .milliseconds(200)
                    guard state.drawn.map({ now - $0 >= interval }) ?? true else { return (state.started, false) }
                    state.drawn = now
                    return (state.started, true)
                }
                guard due else { return }
                errorWriter(
                    (plain ? "" : "\r\u{1B}[2K") + progressLine(job, done, total, elapsed: now - started)
                        + (plain ? "\n" : ""))
            }
            // A job's clock starts when the one before it ends (the first's when the run starts).
            let finish = options.onJobFinished
            options.onJobFinished = { job in
                meter.withLock { $0 = ("", .now, nil) }
                if !plain { errorWriter("\r\u{1B}[2K") }
                finish?(job)
            }
        }
        let interrupt = options.interrupt
        let signals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                interrupt.raise()
                errorWriter("interrupted: finishing the current batch, then writing the report\n")
            }
            source.resume()
            return source
        }
        defer {
            for source in signals { source.cancel() }
        }

        let outcome: RunOutcome
        do {
            outcome = try await PipelineRunner(compiled, options: options).run()
        } catch {
            switch error {
            case .locked(let pid, let lockFile):
                standardError(
                    "Error: \(compiled.spec.name) is already running (process \(pid), lock \(lockFile)); "
                        + "wait for it to finish\n")
                return .locked
            case .cannotStart(let message):
                standardError("Error: \(message)\n")
                return .jobError
            }
        }
        if let path = outcome.reportPath {
            if !quiet {
                standardError(
                    "\(outcome.report.status)\(outcome.report.dryRun ? " (dry run)" : ""): report written to \(path)\n")
            }
        } else {
            standardOutput(outcome.report.json())
        }
        return ExitCode(rawValue: outcome.exitCode) ?? .failure
    }

    /// Runs `cloudsync outbox list|flush|discard FILE`.
    func outbox(_ arguments: [String]) async -> ExitCode {
        guard arguments.count == 2, ["list", "flush", "discard"].contains(arguments[0]) else {
            return usageError("outbox takes list, flush or discard, then a pipeline file")
        }
        guard let compiled = compile(arguments[1]) else { return .usage }
        let path = compiled.spec.state + "/outbox.db"
        guard FileManager.default.fileExists(atPath: path) else {
            standardError("the outbox of \(compiled.spec.name) is empty (\(path) does not exist yet)\n")
            return .success
        }
        do {
            var options = compiled.storeOptions
            options.outbox = try Outbox(storage: SQLiteOutboxStorage(path: path))
            switch arguments[0] {
            case "list":
                let pending = options.outbox?.pending ?? []
                for entry in pending { standardOutput(entry.description + "\n") }
                standardError("\(pending.count) queued write\(pending.count == 1 ? "" : "s")\n")
            case "discard":
                let store = try CloudStore(providers: [], options: options)
                defer { store.close() }
                let count = store.discardPendingWrites()
                standardError("discarded \(count) queued write\(count == 1 ? "" : "s")\n")
            default:
                let providers = try compiled.openProviders()
                let store = try CloudStore(
                    providers: compiled.spec.store.providers.compactMap { providers[$0] }, options: options)
                defer { store.close() }
                let result = try await store.flushOutbox()
                standardError("drained \(result.drained), remaining \(result.remaining), dropped \(result.dropped)\n")
            }
            return .success
        } catch {
            standardError("Error: \(error)\n")
            return .jobError
        }
    }
}

/// `job: done/total keys, rate keys/s, elapsed s, ETA s` — the total and ETA only when the total is known.
func progressLine(_ job: String, _ done: Int, _ total: Int?, elapsed: Duration) -> String {
    let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
    let rate = Double(done) / seconds
    var line =
        "\(job): \(done)" + (total.map { "/\($0)" } ?? "") + " keys, \(Int(rate)) keys/s, "
        + String(format: "%.1f s elapsed", seconds)
    if let total, rate > 0, done < total { line += String(format: ", ETA %.1f s", Double(total - done) / rate) }
    return line
}
