import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation
import Synchronization

/// `cloudsync serve`'s engine: pipelines on their schedules, outboxes flushed between runs.
///
/// Every pipeline of some files runs on its schedule, at most one run at a time each, through the same
/// ``PipelineRunner`` (lock, reports, history) as `cloudsync run`; between runs each outbox is flushed on its
/// `autoFlush` timer. The HTTP endpoints read it through ``pipelines`` and ``failedFiles``.
///
/// Start it with ``start()``, reload the files with ``reload()`` (SIGHUP), end it with ``stop()`` (SIGTERM): running
/// runs stop at their next batch boundary and write an `interrupted` report.
package final class PipelineService: Sendable {
    /// What the service serves and how it talks.
    package struct Configuration: Sendable {
        /// Pipeline files, and directories whose `*.yaml` and `*.yml` files are served (not their subdirectories).
        package var paths: [String]
        /// Loads and compiles one file, its errors rendered with file:line:col.
        package var load: @Sendable (String) -> Result<CompiledPipeline, PipelineError>
        /// Where the service says what it does, a line at a time (standard error in `cloudsync serve`).
        package var log: @Sendable (String) -> Void

        package init(
            paths: [String], load: @escaping @Sendable (String) -> Result<CompiledPipeline, PipelineError>,
            log: @escaping @Sendable (String) -> Void
        ) {
            self.paths = paths
            self.load = load
            self.log = log
        }
    }

    /// What `POST /api/pipelines/NAME/run` got.
    package enum RunRequestAnswer: Sendable, Equatable {
        case started
        case busy
        case unknown
        case stopping
    }

    private struct State {
        var served: [ServedPipeline] = []
        /// Files that have no version running, with why they did not load.
        var failedFiles: [String: String] = [:]
        /// The schedule and flush loops of each file.
        var loops: [String: [Task<Void, Never>]] = [:]
        /// Running runs and flushes, by file.
        var work: [String: Task<Void, Never>] = [:]
        var stopping = false
    }

    private let configuration: Configuration
    private let state = Mutex(State())
    /// When the service started.
    package let startedAt = Date()
    /// Moves with every change to what the endpoints show.
    let changes = ChangeCounter()

    package init(_ configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: Loading

    /// Loads every file and starts their schedules; returns each file's error (nothing runs for those).
    @discardableResult
    package func start() -> [String: String] {
        reload()
    }

    /// Loads every file without starting anything: each file's error, so `serve` can refuse to start on a typo.
    package func check() -> [String: String] {
        loadFiles().errors
    }

    /// The files the paths name, those loaded (each pipeline name once) and every error by file.
    private func loadFiles() -> (
        files: [String], missing: [String: String], loaded: [(String, CompiledPipeline)], errors: [String: String]
    ) {
        let (files, missing) = PipelineFiles.expand(configuration.paths)
        var errors = missing
        var loaded: [(String, CompiledPipeline)] = []
        var names: [String: String] = [:]
        for file in files {
            switch configuration.load(file) {
            case .success(let compiled):
                if let other = names[compiled.spec.name] {
                    errors[file] =
                        "\(file): the pipeline name '\(compiled.spec.name)' is already served from \(other); "
                        + "give one of them another name"
                } else {
                    names[compiled.spec.name] = file
                    loaded.append((file, compiled))
                }
            case .failure(let error):
                errors[file] = error.description
            }
        }
        return (files, missing, loaded, errors)
    }

    /// Loads the files again (SIGHUP) and returns the errors by file.
    ///
    /// Changed files restart their schedules with the new version, files that no longer load keep the version
    /// already running and say why, new files start, and files gone from a directory stop being scheduled (a run of
    /// theirs in progress finishes).
    @discardableResult
    package func reload() -> [String: String] {
        let (files, missing, loaded, errors) = loadFiles()
        // Only a pipeline served for the first time reads its last reports; the others have theirs.
        let servedFiles = Set(state.withLock { $0.served.map(\.file) })
        let seeded = loaded.map { file, compiled in
            (file, compiled, servedFiles.contains(file) ? [] : recentReports(compiled))
        }
        var restart: [(ServedPipeline, catchingUp: Bool)] = []
        var retired: [Task<Void, Never>] = []
        state.withLock { state in
            guard !state.stopping else { return }
            state.failedFiles = [:]
            let kept = Set(files).union(missing.keys)
            for served in state.served where !kept.contains(served.file) {
                retired += state.loops.removeValue(forKey: served.file) ?? []
            }
            state.served.removeAll { !kept.contains($0.file) }
            for (file, compiled, recent) in seeded {
                if let served = state.served.first(where: { $0.file == file }) {
                    served.update {
                        $0.compiled = compiled
                        $0.loadError = nil
                    }
                    retired += state.loops.removeValue(forKey: file) ?? []
                    restart.append((served, false))
                } else {
                    let served = ServedPipeline(file: file, compiled: compiled, recent: recent, changes: changes)
                    state.served.append(served)
                    restart.append((served, true))
                }
            }
            for (file, error) in errors {
                if let served = state.served.first(where: { $0.file == file }) {
                    served.update { $0.loadError = error }
                } else {
                    state.failedFiles[file] = error
                }
            }
        }
        changes.bump()
        for task in retired { task.cancel() }
        for (served, catchingUp) in restart { startLoops(served, catchingUp: catchingUp) }
        for (file, error) in errors.sorted(by: { $0.key < $1.key }) {
            let running = pipelines.contains { $0.file == file }
            configuration.log(
                "\(file) did not load\(running ? "; its previous version keeps running" : ""):\n\(error)")
        }
        return errors
    }

    /// The pipelines served, in the order their files were found.
    package var pipelines: [PipelineStatus] {
        state.withLock { $0.served }.map(\.status)
    }

    /// Files that did not load and have no earlier version running, with why.
    package var failedFiles: [String: String] { state.withLock { $0.failedFiles } }

    /// The compiled version served under `name`.
    package func compiled(named name: String) -> CompiledPipeline? {
        state.withLock { $0.served }.first { $0.name == name }?.compiled
    }

    /// The compiled versions of every pipeline served.
    package var compiledPipelines: [CompiledPipeline] { state.withLock { $0.served }.map(\.compiled) }

    // MARK: Stopping

    /// Stops scheduling, asks every running run to stop at its next batch boundary and waits for their reports.
    package func stop() async {
        let (loops, work) = state.withLock { state in
            state.stopping = true
            let loops = state.loops.values.flatMap { $0 }
            state.loops = [:]
            return (loops, Array(state.work.values))
        }
        for loop in loops { loop.cancel() }
        for task in work { task.cancel() }
        for task in work { await task.value }
        for loop in loops { await loop.value }
    }

    // MARK: Runs

    /// Starts a run of `name` now, unless it is running or flushing; `force` lets its jobs delete past their
    /// `maxDeletes` for this run, as `cloudsync run --force` does.
    package func requestRun(_ name: String, force: Bool = false) -> RunRequestAnswer {
        guard let served = state.withLock({ $0.stopping ? nil : $0.served.first { $0.name == name } }) else {
            return state.withLock { $0.stopping } ? .stopping : .unknown
        }
        return startRun(served, due: nil, trigger: .api, force: force) ? .started : .busy
    }

    /// Starts the pipeline's schedule and flush loops; `catchingUp` (a pipeline served for the first time since the
    /// service started, not one reloaded) lets a `catchUp` schedule run the slot it missed.
    private func startLoops(_ served: ServedPipeline, catchingUp: Bool) {
        let compiled = served.compiled
        var loops: [Task<Void, Never>] = []
        if let schedule = compiled.spec.schedule {
            let planner = SlotPlanner(schedule: schedule, pipeline: compiled.spec.name)
            // The last real run as the state keeps it, whoever ran it (this host, another, a `cloudsync run`).
            let lastRun =
                catchingUp && schedule.catchUp
                ? (try? PipelineHistory.runs(of: compiled, limit: 20))?.first { !$0.dryRun }.flatMap {
                    ReportTime.date($0.startedAt)
                } : nil
            loops.append(Task { await self.scheduleLoop(served, planner: planner, lastRun: lastRun) })
        } else {
            served.update { $0.nextRun = nil }
        }
        if let every = compiled.spec.store.outbox.autoFlushMs, compiled.spec.store.outbox.enabled {
            loops.append(Task { await self.flushLoop(served, every: every) })
        }
        let accepted = state.withLock { state in
            guard !state.stopping else { return false }
            state.loops[served.file, default: []] += loops
            return true
        }
        if !accepted { for loop in loops { loop.cancel() } }
    }

    private func scheduleLoop(_ served: ServedPipeline, planner: SlotPlanner, lastRun: Date?) async {
        var after = Date()
        if let missed = planner.missed(lastRun: lastRun, now: after) {
            configuration.log(
                "\(served.name): a slot at \(ReportTime.string(missed.slot)) was missed; running it now (catchUp)")
            await fire(served, due: missed, trigger: .catchUp)
        }
        while !Task.isCancelled {
            guard let due = planner.next(after: after) else {
                served.update { $0.nextRun = nil }
                return
            }
            served.update { $0.nextRun = due }
            guard await Self.sleep(until: due.start) else { return }
            // A slot already past when this one fired (a suspended machine, a jitter longer than the interval) is
            // not run late, one after another: the next is the first still to come.
            after = max(due.slot, Date())
            await fire(served, due: due, trigger: .schedule)
        }
    }

    /// Runs `due`'s slot unless the last run still runs (the slot is skipped and counted); waits for a flush in
    /// progress to end first.
    private func fire(_ served: ServedPipeline, due: SlotPlanner.Due, trigger: RunTrigger) async {
        if case .flushing = served.activity, let flush = state.withLock({ $0.work[served.file] }) { await flush.value }
        guard !Task.isCancelled else { return }
        if !served.isRunning, served.compiled.spec.sharedState != nil {
            // Hosts sharing the state share the schedule: the first to claim the slot runs it.
            do {
                guard try SharedSlots.claim(due.slot, of: served.compiled, host: Self.host) else {
                    served.skip(.claimedElsewhere)
                    return
                }
            } catch {
                served.skip(.cannotStart, message: "\(error.code): \(error.message)")
                configuration.log(
                    "\(served.name): the slot at \(ReportTime.string(due.slot)) could not be claimed: \(error.message)")
                return
            }
        }
        if !startRun(served, due: due, trigger: trigger) {
            guard !state.withLock({ $0.stopping }) else { return }
            served.skip(.running)
            configuration.log(
                "\(served.name): the slot at \(ReportTime.string(due.slot)) was skipped: the previous run still runs")
        }
    }

    /// Takes the pipeline and starts a run in a task of its own; false when it was busy.
    private func startRun(
        _ served: ServedPipeline, due: SlotPlanner.Due?, trigger: RunTrigger, force: Bool = false
    ) -> Bool {
        let now = Date()
        guard !state.withLock({ $0.stopping }), served.beginRun(trigger, at: now) else { return false }
        let compiled = served.compiled
        let log = configuration.log
        let name = compiled.spec.name
        let task = Task {
            var options = RunOptions()
            options.force = force
            options.onJobFinished = { job in
                var line = "\(name): \(job.name) (\(job.type)): \(job.status)"
                if let error = job.error { line += " — \(error.code): \(error.message)" }
                log(line)
            }
            log(
                "\(name): run started (\(trigger.rawValue)\(force ? ", forced past maxDeletes" : "")"
                    + "\(due.map { ", slot \(ReportTime.string($0.slot))" } ?? ""))")
            do throws(RunRefusal) {
                let outcome = try await PipelineRunner(compiled, options: options).run()
                served.finishRun(outcome.report, lag: due.map { now.timeIntervalSince($0.slot) })
                var line =
                    "\(name): run \(outcome.report.runId) ended \(outcome.report.status) in "
                    + String(format: "%.1f s", Double(outcome.report.durationMs) / 1000)
                if let path = outcome.reportPath { line += ", report \(path)" }
                if let reportError = outcome.reportError { line += "; \(reportError)" }
                log(line)
            } catch {
                let (reason, message) = Self.describe(error)
                served.skip(reason, message: message)
                served.becomeIdle()
                log("\(name): the run did not start: \(message)")
            }
            self.state.withLock { _ = $0.work.removeValue(forKey: served.file) }
        }
        let accepted = state.withLock { state in
            guard !state.stopping else { return false }
            state.work[served.file] = task
            return true
        }
        if !accepted { task.cancel() }
        return true
    }

    private static func describe(_ refusal: RunRefusal) -> (SkipReason, String) {
        switch refusal {
        case .locked(let pid, let lockFile):
            return (.locked, "another command holds the lock (\(RunRefusal.holder(pid)), \(lockFile))")
        case .lockedElsewhere(let holder, let lock):
            return (.locked, "another runner holds the lock (\(holder ?? "just taken"), \(lock))")
        case .cannotStart(let error), .stateUnavailable(let error):
            return (.cannotStart, "\(error.code): \(error.message)")
        }
    }

    // MARK: Outbox flushes

    private func flushLoop(_ served: ServedPipeline, every milliseconds: Int64) async {
        while !Task.isCancelled {
            guard await Self.sleep(until: Date().addingTimeInterval(Double(milliseconds) / 1000)) else { return }
            guard served.beginFlush() else { continue }
            let task = Task { await self.flush(served) }
            let accepted = state.withLock { state in
                guard !state.stopping else { return false }
                state.work[served.file] = task
                return true
            }
            if !accepted { task.cancel() }
            await task.value
            state.withLock { _ = $0.work.removeValue(forKey: served.file) }
            served.becomeIdle()
        }
    }

    /// Opens the pipeline as `cloudsync outbox flush` does and retries what waits; a pipeline whose lock another
    /// holds is left alone until the next tick.
    private func flush(_ served: ServedPipeline) async {
        let compiled = served.compiled
        if compiled.spec.sharedState == nil,
            !FileManager.default.fileExists(atPath: compiled.spec.state + "/outbox.db")
        {
            return
        }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .write)
        } catch {
            let (reason, message) = Self.describe(error)
            guard reason != .locked else { return }
            served.update { $0.flushes.failures += 1 }
            configuration.log("\(served.name): the outbox flush could not start: \(message)")
            return
        }
        guard let outbox = session.outbox, outbox.count > 0 else {
            served.update {
                $0.outboxPending = [:]
                $0.flushes.lastAt = Date()
            }
            await session.close()
            return
        }
        do {
            let result = try await session.store.flushOutbox()
            let pending = outbox.countByProvider
            served.update {
                $0.flushes.runs += 1
                $0.flushes.drained += result.drained
                $0.flushes.dropped += result.dropped
                $0.flushes.lastAt = Date()
                $0.outboxPending = pending
            }
            if result.drained > 0 || result.dropped > 0 {
                configuration.log(
                    "\(served.name): outbox flushed: drained \(result.drained), dropped \(result.dropped), "
                        + "remaining \(result.remaining)")
            }
        } catch {
            served.update { $0.flushes.failures += 1 }
            configuration.log("\(served.name): the outbox flush failed: \(error.code): \(error.message)")
        }
        await session.close()
    }

    // MARK: History

    /// The last `limit` runs of `pipeline` (every pipeline when nil) as their state keeps them, newest first, and
    /// the pipelines whose state could not be read.
    package func history(pipeline: String?, limit: Int) -> (runs: [ServedRun], errors: [String: String]) {
        var runs: [ServedRun] = []
        var errors: [String: String] = [:]
        for compiled in compiledPipelines where pipeline == nil || compiled.spec.name == pipeline {
            do {
                runs += try PipelineHistory.runs(of: compiled, limit: limit).map {
                    ServedRun(pipeline: compiled.spec.name, run: $0)
                }
            } catch {
                errors[compiled.spec.name] = "\(error.code): \(error.message)"
            }
        }
        runs.sort { ($0.run.startedAt, $0.run.id) > ($1.run.startedAt, $1.run.id) }
        return (Array(runs.prefix(limit)), errors)
    }

    /// The report of run `id`: from memory when it is recent, else as the pipeline's state keeps it (with the history
    /// in shared state, whichever host ran it; else the report file its history row names).
    package func report(id: String) -> Data? {
        let served = state.withLock { $0.served }
        for pipeline in served {
            if let report = pipeline.status.recent.last(where: { $0.runId == id }) {
                return Data(report.json().utf8)
            }
        }
        for pipeline in served where id.hasPrefix(pipeline.name + "-") {
            guard let data = try? PipelineHistory.report(of: pipeline.compiled, id: id),
                let report = try? JSONDecoder().decode(RunReport.self, from: data), report.runId == id
            else { continue }
            return data
        }
        return nil
    }

    /// This process as other hosts see it in claimed slots: `host/pid`.
    static let host = "\(ProcessInfo.processInfo.hostName)/\(getpid())"

    /// Whether each pipeline's state answers, by name: nil when it does, else why not.
    package func stateReachability() -> [String: String?] {
        var answers: [String: String?] = [:]
        for compiled in compiledPipelines {
            do {
                _ = try PipelineHistory.runs(of: compiled, limit: 1)
                answers[compiled.spec.name] = .some(nil)
            } catch {
                answers[compiled.spec.name] = "\(error.code): \(error.message)"
            }
        }
        return answers
    }

    /// The reports of the pipeline's last runs, oldest first, as its state keeps them.
    private func recentReports(_ compiled: CompiledPipeline) -> [RunReport] {
        let kept = (try? PipelineHistory.recentReports(of: compiled, limit: ServedPipeline.recentLimit)) ?? []
        return kept.reversed().compactMap { try? JSONDecoder().decode(RunReport.self, from: $0) }
    }

    // MARK: Time

    /// Sleeps until `date` by the wall clock, in steps of at most 30 s so a clock set forward or back is followed;
    /// false when the task was cancelled.
    static func sleep(until date: Date) async -> Bool {
        while true {
            let left = date.timeIntervalSinceNow
            if left <= 0 { return !Task.isCancelled }
            do {
                try await Task.sleep(for: .milliseconds(Int64(min(left, 30) * 1000) + 1))
            } catch {
                return false
            }
        }
    }
}

/// A row of a pipeline's run history, with the pipeline's name.
package struct ServedRun: Sendable {
    package var pipeline: String
    package var run: RunRecord
}
