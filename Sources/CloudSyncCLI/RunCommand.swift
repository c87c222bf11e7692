import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

extension CommandLineTool {
    /// Runs `cloudsync run FILE [--job NAME]... [--dry-run] [--report PATH|-] [--yes] [--force] [--read-unchanged]
    /// [--quiet] [--progress MODE] [--verbose]`.
    func runPipeline(_ parsed: ParsedArguments) async -> ExitCode {
        var options: RunOptions
        switch runOptions(parsed) {
        case .success(let parsedOptions): options = parsedOptions
        case .failure(let stop): return stop.status
        }
        let quiet = parsed.flag(Commands.runQuiet)
        let progress = parsed.value(Commands.runProgress) ?? "auto"
        let file = parsed.argument(Commands.file) ?? ""
        guard let compiled = compile(file) else { return .usage }
        if let refusal = refusesRun(options, of: compiled, file: file) { return refusal }
        // What the pipeline cannot promise (a move from a provider without conditional removals), once a run.
        if !quiet {
            for warning in compiled.spec.warnings { standardError(warning.description + "\n") }
        }
        let showProgress = !quiet && (progress == "always" || (progress == "auto" && isatty(STDERR_FILENO) == 1))
        // On a terminal the progress line is redrawn in place; with NO_COLOR set it is plain text, a line at a time.
        let redrawn = showProgress && environment["NO_COLOR"] == nil
        tellJobs(&options, of: compiled, quiet: quiet, counted: showProgress)
        if showProgress { showProgressLine(&options, redrawn: redrawn) }
        switch await execute(compiled, options, redrawn: redrawn) {
        case .success(let outcome): return tell(outcome, of: compiled, options, quiet: quiet)
        case .failure(let refusal): return refused(refusal, compiled)
        }
    }

    /// The run's options from the command line: `--join-wait` and `--run-id` checked.
    private func runOptions(_ parsed: ParsedArguments) -> Result<RunOptions, Stopped> {
        var options = RunOptions()
        options.jobNames = parsed.values(Commands.runJob)
        options.runNeeds = !parsed.flag(Commands.runNoNeeds)
        options.reportPath = parsed.value(Commands.runReport)
        options.dryRun = parsed.flag(Commands.runDryRun)
        options.yes = parsed.flag(Commands.runYes)
        options.force = parsed.flag(Commands.runForce)
        options.readUnchanged = parsed.flag(Commands.runReadUnchanged)
        options.join = parsed.flag(Commands.runJoin)
        if let text = parsed.value(Commands.runJoinWait) {
            // Whole seconds, or a duration as a pipeline file writes one; at most a day.
            let milliseconds = text.allSatisfy { $0.isASCII && $0.isNumber } ? Int64(text).map { $0 * 1000 } : nil
            guard let wait = milliseconds ?? DurationText.milliseconds(text), wait <= 86_400_000 else {
                return .failure(
                    Stopped(
                        status: usageError(
                            "--join-wait wants a duration of at most a day: whole seconds, or as a pipeline file "
                                + "writes one (90, 90s, 5m, 1h30m); found '\(text)'", Commands.run)))
            }
            options.joinWait = .milliseconds(wait)
        }
        if let id = parsed.value(Commands.runID) {
            guard !id.isEmpty, id.count <= 200, id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
            else {
                return .failure(
                    Stopped(
                        status: usageError(
                            "--run-id wants 1 to 200 printable characters without spaces; found '\(id)'", Commands.run))
                )
            }
            options.runID = id
        }
        options.logger = requestLogger(parsed)
        return .success(options)
    }

    /// The usage error of options that do not go together for this pipeline (joining a dry run, joining a state that
    /// is not shared, a job it does not have); nil when they do.
    private func refusesRun(_ options: RunOptions, of compiled: CompiledPipeline, file: String) -> ExitCode? {
        if options.join || options.joinWait > .zero, options.dryRun {
            return usageError("--join and --join-wait help a real run; a dry run does not join one", Commands.run)
        }
        if options.joinWait > .zero, !options.join {
            return usageError("--join-wait is how long --join waits for a run to start; add --join", Commands.run)
        }
        if options.join, compiled.spec.sharedState == nil {
            return usageError(
                "--join needs the pipeline's state in PostgreSQL (state: { postgresql: … }), where runners share "
                    + "their work; \(file) keeps it in \(compiled.spec.state)", Commands.run)
        }
        let jobNames = compiled.spec.jobs.map(\.name)
        if let unknown = options.jobNames.first(where: { !jobNames.contains($0) }) {
            var message = "no job named '\(unknown)' in \(file); its jobs: " + jobNames.joined(separator: ", ")
            if let guess = closest(unknown, among: jobNames) { message += "; did you mean '\(guess)'?" }
            return usageError(message, Commands.run)
        }
        return nil
    }

    /// Has each job say how it ended, in a line of its own on standard error, numbered when `counted`.
    ///
    /// Quiet still names every job that failed or could not run: a cron mail must say why the exit status is not 0.
    func tellJobs(_ options: inout RunOptions, of compiled: CompiledPipeline, quiet: Bool, counted: Bool) {
        let errorWriter = standardError
        let total = JobGraph(compiled.spec.jobs).selected(options.jobNames, withNeeds: options.runNeeds).count
        let finished = Protected(0)
        options.onJobFinished = { job in
            if quiet, job.status != .failed, job.status != .error { return }
            let done = finished.withLock { count in
                count += 1
                return count
            }
            errorWriter((counted ? "[\(done)/\(total)] " : "") + Self.jobLine(job) + "\n")
        }
    }

    /// How a job ended: its status and counts, why it could not run, and its first failing key.
    static func jobLine(_ job: RunReport.Job) -> String {
        // A job that could not run has done nothing worth counting; its error says why.
        let shown =
            job.status == .error && job.counts.values.allSatisfy { $0 == 0 }
            ? [:] : job.counts.filter { $0.value != 0 || !JobCount.shownWhenNonZero.contains($0.key) }
        let counts = shown.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        var line = "\(job.name) (\(job.type)): \(job.status)"
        if !counts.isEmpty { line += " — \(counts)" }
        if let error = job.error { line += " — \(error.code): \(error.message)" }
        // A job that did not end ok says why in its own line: the first failing key, and how many more.
        if job.status != .ok, let first = job.failures.first {
            let more = job.failures.count - 1 + job.failuresOmitted
            line += "; first: \(first.key) \(first.code) \(first.message)" + (more > 0 ? " (and \(more) more)" : "")
        }
        return line
    }

    /// Shows how far the running job is on standard error: redrawn in place five times a second, or (not `redrawn`)
    /// a plain line a second.
    private func showProgressLine(_ options: inout RunOptions, redrawn: Bool) {
        let errorWriter = standardError
        let plain = !redrawn
        let meter = Protected<(job: String, started: ContinuousClock.Instant, drawn: ContinuousClock.Instant?)>(
            ("", .now, nil))
        options.onProgress = { job, done, total, unit in
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
                (plain ? "" : "\r\u{1B}[2K") + progressLine(job, done, total, unit: unit, elapsed: now - started)
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

    /// Runs the pipeline in a task of its own, which SIGINT and SIGTERM cancel while it lasts: the run stops at its
    /// next batch boundary and still writes its report.
    func execute(_ compiled: CompiledPipeline, _ options: RunOptions, redrawn: Bool) async
        -> Result<RunOutcome, RunRefusal>
    {
        let errorWriter = standardError
        let run = Task { () -> Result<RunOutcome, RunRefusal> in
            do throws(RunRefusal) {
                return .success(try await PipelineRunner(compiled, options: options).run())
            } catch {
                return .failure(error)
            }
        }
        let signals = SignalWatch([SIGINT, SIGTERM]) { _ in
            run.cancel()
            // The notice takes the progress line's place rather than running on after it.
            errorWriter(
                (redrawn ? "\r\u{1B}[2K" : "") + "interrupted: finishing the current batch, then writing the report\n")
        }
        defer { signals.restore() }
        return await run.value
    }

    /// Runs `compiled` as a command without a progress line runs it (`apply`, `restore`, `forget`,
    /// `migrations undo`): the report where `--json` (standard output) or `--report` says, each job's line unless
    /// `--quiet`, and the run's exit status.
    func runWithoutProgress(_ compiled: CompiledPipeline, _ options: RunOptions, _ parsed: ParsedArguments) async
        -> ExitCode
    {
        var options = options
        options.reportPath = parsed.flag(Commands.json) ? "-" : parsed.value(Commands.runReport)
        let quiet = parsed.flag(Commands.runQuiet)
        tellJobs(&options, of: compiled, quiet: quiet, counted: false)
        switch await execute(compiled, options, redrawn: false) {
        case .success(let outcome): return tell(outcome, of: compiled, options, quiet: quiet)
        case .failure(let refusal): return refused(refusal, compiled)
        }
    }

    /// Says how the run went and answers its exit status: a run already finished, nothing to join, what a joining
    /// runner did, or where the report went (the report itself on standard output when it has no file, or when its
    /// file could not be written).
    func tell(_ outcome: RunOutcome, of compiled: CompiledPipeline, _ options: RunOptions, quiet: Bool)
        -> ExitCode
    {
        if let finished = outcome.alreadyFinished {
            if !quiet {
                standardError(
                    "run \(finished.id) of \(compiled.spec.name) already finished at \(finished.finishedAt) "
                        + "(\(finished.status)); nothing to do\n")
            }
            return .success
        }
        if let joined = outcome.joined {
            return tellJoined(joined, outcome, of: compiled, options, quiet: quiet)
        }
        if let reportError = outcome.reportError {
            // The jobs ran: their status stands, and the report is not lost.
            standardError(
                "Error: the run finished (\(outcome.report.status)) but \(reportError); the report follows on "
                    + "standard output\n")
            standardOutput(outcome.report.json())
        } else if let path = outcome.reportPath {
            // A run that could not run its jobs at all says why even when quiet: a cron mail must not only point at a
            // file. (A job that could not run has said why in its own line.)
            let why = outcome.report.error.map { " — \($0.code): \($0.message);" } ?? ":"
            if !quiet || outcome.report.error != nil {
                standardError(
                    "\(outcome.report.status)\(outcome.report.dryRun ? " (dry run)" : "")\(why) report written to \(path)\n"
                )
            }
        } else {
            standardOutput(outcome.report.json())
        }
        return ExitCode(outcome.status)
    }

    /// What a runner that joined (or found nothing to join) says: the run's report is the starter's.
    private func tellJoined(
        _ joined: JoinedRun, _ outcome: RunOutcome, of compiled: CompiledPipeline, _ options: RunOptions, quiet: Bool
    ) -> ExitCode {
        guard joined.run != nil else {
            if !quiet {
                let which = options.runID.map { "run \($0)" } ?? "run"
                let waited =
                    options.joinWait > .zero
                    ? " after waiting " + DurationText.format(milliseconds: options.joinWait.milliseconds) : ""
                standardError("nothing to join: no \(which) of \(compiled.spec.name) is under way\(waited)\n")
            }
            return .success
        }
        let ranges = joined.ranges.sorted { $0.key < $1.key }.map { "\($0.value) of \($0.key)" }
        if !quiet || outcome.status != .ok {
            standardError(
                "joined the run of \(compiled.spec.name): \(outcome.status); ranges finished: "
                    + (ranges.isEmpty ? "none" : ranges.joined(separator: ", "))
                    + (joined.drained > 0 ? "; queued writes taken from the outbox: \(joined.drained)" : "")
                    + (outcome.report.error.map { " — \($0.code): \($0.message)" } ?? "") + "\n")
        }
        return ExitCode(outcome.status)
    }

    /// With `--verbose`, a logger writing the providers' debug lines (their HTTP requests) to standard error as
    /// `debug: PROVIDER: ...`; otherwise none.
    func requestLogger(_ parsed: ParsedArguments) -> ProviderLogger {
        guard parsed.flag(Commands.verbose) else { return .disabled }
        let errorWriter = standardError
        return ProviderLogger(minimumLevel: .debug) { level, line in errorWriter("\(level): \(line)\n") }
    }

    /// Runs `cloudsync history FILE [--limit N] [--json]`.
    func history(_ parsed: ParsedArguments) -> ExitCode {
        let json = parsed.flag(Commands.json)
        var limit = 20
        if let text = parsed.value(Commands.historyLimit) {
            guard let number = Int(text), number > 0 else {
                return usageError("--limit needs a whole number of at least 1; found '\(text)'", Commands.history)
            }
            limit = number
        }
        guard let compiled = compile(parsed.argument(Commands.file) ?? "", unsetVariables: .deferred) else {
            return .usage
        }
        let runs: [RunRecord]
        do {
            runs = try PipelineHistory.runs(of: compiled, limit: limit)
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
        if json {
            standardOutput(encoded(runs))
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
                "Error: \(compiled.spec.name) is already running (\(RunRefusal.holder(pid)), lock \(lockFile)); wait for it to finish\n"
            )
            return .locked
        case .lockedElsewhere(let holder, let lock):
            let who = holder ?? "a runner that has only just taken the lock"
            standardError("Error: \(compiled.spec.name) is already running (\(who), \(lock)); wait for it to finish\n")
            return .locked
        case .cannotStart(let error), .stateUnavailable(let error):
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
    }
}

/// `job: done/total keys, rate keys/s, elapsed s, ETA s` (or packs, as `unit` says) — the total and ETA only when the
/// total is known.
func progressLine(_ job: String, _ done: Int, _ total: Int?, unit: String = "keys", elapsed: Duration) -> String {
    let seconds = max(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, 0.001)
    let rate = Double(done) / seconds
    var line =
        "\(job): \(done)" + (total.map { "/\($0)" } ?? "")
        + " \(unit), \(rate < 10 && rate > 0 ? String(format: "%.1f", rate) : String(Int(rate))) \(unit)/s, "
        + String(format: "%.1f s elapsed", seconds)
    if let total, rate > 0, done < total { line += String(format: ", ETA %.1f s", Double(total - done) / rate) }
    return line
}
