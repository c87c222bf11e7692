import CloudSync
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
        let runOptions = options
        let run = Task { () -> Result<RunOutcome, RunRefusal> in
            do throws(RunRefusal) {
                return .success(try await PipelineRunner(compiled, options: runOptions).run())
            } catch {
                return .failure(error)
            }
        }
        let signals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                run.cancel()
                errorWriter("interrupted: finishing the current batch, then writing the report\n")
            }
            source.resume()
            return source
        }
        defer {
            for source in signals { source.cancel() }
        }

        let outcome: RunOutcome
        switch await run.value {
        case .success(let finished): outcome = finished
        case .failure(let refusal): return refused(refusal, compiled)
        }
        if let path = outcome.reportPath {
            if !quiet {
                standardError(
                    "\(outcome.report.status)\(outcome.report.dryRun ? " (dry run)" : ""): report written to \(path)\n")
            }
        } else {
            standardOutput(outcome.report.json())
        }
        return ExitCode(outcome.status)
    }

    /// Runs `cloudsync outbox list|flush|discard FILE`.
    ///
    /// Each opens the pipeline's run session, so it waits for no one and is refused (75) while a run holds the lock;
    /// `list` opens it read-only and never is.
    func outbox(_ arguments: [String]) async -> ExitCode {
        guard arguments.count == 2, ["list", "flush", "discard"].contains(arguments[0]) else {
            return usageError("outbox takes list, flush or discard, then a pipeline file")
        }
        guard let compiled = compile(arguments[1]) else { return .usage }
        guard FileManager.default.fileExists(atPath: compiled.spec.state + "/outbox.db") else {
            standardError(
                "the outbox of \(compiled.spec.name) is empty (\(compiled.spec.state)/outbox.db does not exist yet)\n")
            return .success
        }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: arguments[0] == "list" ? .dryRun : .write)
        } catch {
            return refused(error, compiled)
        }
        switch arguments[0] {
        case "list":
            let pending = session.outbox?.pending ?? []
            for entry in pending { standardOutput(entry.description + "\n") }
            standardError("\(pending.count) queued write\(pending.count == 1 ? "" : "s")\n")
        case "discard":
            let count = session.store.discardPendingWrites()
            standardError("discarded \(count) queued write\(count == 1 ? "" : "s")\n")
        default:
            do {
                let result = try await session.store.flushOutbox()
                standardError("drained \(result.drained), remaining \(result.remaining), dropped \(result.dropped)\n")
            } catch {
                standardError("Error: \(error)\n")
                await session.close()
                return .jobError
            }
        }
        await session.close()
        return .success
    }

    /// Runs `cloudsync history FILE [--limit N] [--json]`.
    func history(_ arguments: [String]) -> ExitCode {
        var json = false
        var limit = 20
        var file: String?
        var index = 0
        while index < arguments.count {
            switch arguments[index] {
            case "--json": json = true
            case "--limit":
                index += 1
                guard index < arguments.count, let number = Int(arguments[index]), number > 0 else {
                    return usageError("--limit needs a whole number of at least 1")
                }
                limit = number
            case let option where option.hasPrefix("-"): return usageError("unknown option '\(option)'")
            case let argument:
                guard file == nil else { return usageError("history takes one pipeline file") }
                file = argument
            }
            index += 1
        }
        guard let file else { return usageError("history needs a pipeline file") }
        guard let compiled = compile(file) else { return .usage }
        let path = compiled.spec.state + "/state.db"
        var runs: [StateDatabase.Run] = []
        if FileManager.default.fileExists(atPath: path) {
            do {
                let database = try StateDatabase(path: path, readOnly: true)
                runs = try database.runs(limit: limit)
                database.close()
            } catch {
                standardError("Error: \(error.message)\n")
                return .jobError
            }
        }
        if json {
            standardOutput(String(decoding: (try? JSONEncoder.sorted.encode(runs)) ?? Data(), as: UTF8.self) + "\n")
        } else if runs.isEmpty {
            standardError("\(compiled.spec.name) has not run yet\n")
        } else {
            for run in runs {
                let jobs = run.jobs.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                standardOutput(
                    "\(run.startedAt)  \(run.status.rawValue)\(run.dryRun ? " (dry run)" : "")  jobs: \(jobs)  "
                        + "\(run.report ?? "report on stdout")\n")
            }
        }
        return .success
    }

    func refused(_ refusal: RunRefusal, _ compiled: CompiledPipeline) -> ExitCode {
        switch refusal {
        case .locked(let pid, let lockFile):
            standardError(
                "Error: \(compiled.spec.name) is already running (process \(pid), lock \(lockFile)); wait for it to finish\n"
            )
            return .locked
        case .cannotStart(let message):
            standardError("Error: \(message)\n")
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
