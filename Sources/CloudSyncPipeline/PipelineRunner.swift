import CloudSync
import CloudSyncCrypto
import CloudSyncLocal
import Foundation

/// How `cloudsync run` was asked to run.
public struct RunOptions: Sendable {
    /// Only the jobs with these names (all when empty), in file order.
    public var jobNames: [String] = []
    public var dryRun = false
    /// Confirms `clear` jobs that do not say `confirm: true`.
    public var yes = false
    /// Overrides the file's report path; `-` writes the report to standard output.
    public var reportPath: String?
    public var interrupt = InterruptFlag()
    /// Told, in words for people, what each job did as it ends.
    public var onJobFinished: (@Sendable (RunReport.Job) -> Void)?
    /// Told how far the running job is: its name, keys done, and the total when known.
    public var onProgress: (@Sendable (String, Int, Int?) -> Void)?

    public init() {}
}

/// What a run ended with.
public struct RunOutcome: Sendable {
    public var report: RunReport
    /// Where the report was written; nil when it went to standard output.
    public var reportPath: String?
    public var exitCode: Int32
}

/// Why a run could not start.
public enum RunRefusal: Error, Sendable {
    /// Another run of the pipeline holds the lock.
    case locked(pid: Int32, lockFile: String)
    /// The state directory or a provider could not be opened.
    case cannotStart(String)
}

/// Runs a compiled pipeline's jobs in order against its store and produces the report.
public struct PipelineRunner {
    public static let failureListLimit = 100

    let compiled: CompiledPipeline
    let options: RunOptions

    public init(_ compiled: CompiledPipeline, options: RunOptions) {
        self.compiled = compiled
        self.options = options
    }

    public func run() async throws(RunRefusal) -> RunOutcome {
        let spec = compiled.spec
        let clock = SystemClock()
        let started = clock.nowMilliseconds()
        let runID = "\(spec.name)-\(started)-\(getpid())"

        // State directory and lock: a dry run creates neither.
        var lock: RunLock?
        if !options.dryRun {
            do {
                try FileManager.default.createDirectory(
                    atPath: spec.state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                switch try RunLock.acquire(in: spec.state) {
                case .acquired(let acquired): lock = acquired
                case .heldBy(let pid): throw RunRefusal.locked(pid: pid, lockFile: spec.state + "/run.lock")
                }
            } catch let refusal as RunRefusal {
                throw refusal
            } catch {
                throw RunRefusal.cannotStart("cannot use the state directory \(spec.state): \(error)")
            }
        }
        defer { lock?.release() }

        let providers: [String: MeteredProvider]
        do {
            providers = try openProviders().mapValues(MeteredProvider.init)
        } catch {
            throw RunRefusal.cannotStart(error.description)
        }
        let drops = Protected<[String: Int]>([:])
        var storeOptions = compiled.storeOptions
        var outbox: Outbox?
        if spec.store.outbox.enabled {
            do {
                outbox = try makeOutbox(drops: drops)
            } catch {
                throw RunRefusal.cannotStart("cannot open the outbox in \(spec.state): \(error)")
            }
        }
        storeOptions.outbox = outbox
        let store: CloudStore
        do {
            // Providers the file declares outside store.providers are reachable by jobs, not by the store's routing.
            store = try CloudStore(
                providers: spec.store.providers.compactMap { providers[$0] },
                attached: spec.providers.filter { !spec.store.providers.contains($0.id) }.compactMap {
                    providers[$0.id]
                },
                options: storeOptions)
        } catch {
            throw RunRefusal.cannotStart(error.description)
        }
        defer { store.close() }

        // The outbox drains before the first job, so jobs see the state earlier runs meant to leave.
        let pendingBefore = outbox?.count ?? 0
        let flushed = (try? await store.flushOutbox()) ?? FlushResult(drained: 0, remaining: pendingBefore, dropped: 0)

        var jobs: [RunReport.Job] = []
        let selected = spec.jobs.filter { options.jobNames.isEmpty || options.jobNames.contains($0.name) }
        for job in selected {
            if options.interrupt.isRaised {
                jobs.append(
                    RunReport.Job(
                        name: job.name, type: job.type, status: "skipped", counts: [:], failures: [], failuresOmitted: 0
                    ))
                continue
            }
            var executor = JobExecutor(store: store, compiled: compiled, options: options, providers: providers)
            let result = await executor.run(job)
            options.onJobFinished?(result)
            jobs.append(result)
        }

        var providerLines: [RunReport.Provider] = []
        for provider in spec.providers {
            let metered = providers[provider.id]!
            let meter = metered.reading
            providerLines.append(
                RunReport.Provider(
                    id: provider.id, type: provider.type.rawValue, available: await metered.isAvailable(),
                    requests: meter.requests, bytesRead: meter.bytesRead, bytesWritten: meter.bytesWritten))
        }
        let finished = clock.nowMilliseconds()
        let interrupted = options.interrupt.isRaised
        let failed = jobs.contains { $0.status == "failed" || $0.status == "error" }
        let report = RunReport(
            pipeline: spec.name, runId: runID, status: interrupted ? "interrupted" : failed ? "failed" : "ok",
            dryRun: options.dryRun, startedAt: iso8601(started), finishedAt: iso8601(finished),
            durationMs: finished - started, jobs: jobs,
            outbox: RunReport.Outbox(
                pendingBefore: pendingBefore, drained: flushed.drained, dropped: drops.withLock { $0 },
                pendingAfter: outbox?.count ?? 0),
            providers: providerLines)

        let exitCode: Int32 =
            interrupted
            ? 130 : jobs.contains { $0.status == "error" } ? 2 : jobs.contains { $0.status == "failed" } ? 1 : 0
        let path = reportPath(startedAt: iso8601(started))
        if let path {
            do {
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try report.json().write(toFile: path, atomically: true, encoding: .utf8)
            } catch {
                throw RunRefusal.cannotStart(
                    "the run finished but its report could not be written to \(path): \(error)")
            }
        }
        return RunOutcome(report: report, reportPath: path, exitCode: exitCode)
    }

    /// The report's path: `--report`, else the file's pattern, else `<state>/reports/`; nil for standard output.
    private func reportPath(startedAt: String) -> String? {
        if options.reportPath == "-" { return nil }
        let stamp = startedAt.replacingOccurrences(of: ":", with: "-")
        let pattern =
            options.reportPath.map { resolvePath($0, against: FileManager.default.currentDirectoryPath) }
            ?? compiled.spec.reportPath ?? compiled.spec.state + "/reports/{name}-{startedAt}.json"
        return pattern.replacingOccurrences(of: "{name}", with: compiled.spec.name)
            .replacingOccurrences(of: "{startedAt}", with: stamp)
    }

    /// The providers; a dry run reads what exists as it is and stands in empty ones for what does not, so nothing
    /// is created or changed.
    private func openProviders() throws(CloudSyncError) -> [String: any Provider] {
        guard options.dryRun else { return try compiled.openProviders() }
        var opened: [String: any Provider] = [:]
        for provider in compiled.spec.providers {
            let capabilities = CompiledPipeline.capabilities(of: provider)
            let path = provider.path?.value ?? ""
            let real: any Provider
            switch provider.type {
            case .sqlite where FileManager.default.fileExists(atPath: path):
                real = try SQLiteProvider(
                    id: provider.id, path: path, maxBytes: provider.maxBytes, maxValueBytes: provider.maxValueBytes,
                    readOnly: true)
            case .directory where FileManager.default.fileExists(atPath: path):
                real = try DirectoryProvider(id: provider.id, root: path, maxValueBytes: provider.maxValueBytes)
            case .icloudKV:
                real = PlatformOnlyProvider(id: provider.id, capabilities: capabilities)
            default:
                real = MemoryProvider(
                    id: provider.id, capabilities: capabilities,
                    items: provider.items.map { KeyValue($0.key, $0.value) })
            }
            opened[provider.id] = DryRunProvider(wrapped: real)
        }
        return opened
    }

    private func makeOutbox(drops: Protected<[String: Int]>) throws -> Outbox {
        let limits = Outbox.Limits(
            maxEntries: compiled.spec.store.outbox.maxEntries, maxAttempts: compiled.spec.store.outbox.maxAttempts,
            maxAge: .milliseconds(compiled.spec.store.outbox.maxAgeMs))
        let onDropped: @Sendable (OutboxEntry, Outbox.DropReason) -> Void = { _, reason in
            drops.withLock { $0[reason.rawValue, default: 0] += 1 }
        }
        let path = compiled.spec.state + "/outbox.db"
        guard options.dryRun else {
            return try Outbox(storage: SQLiteOutboxStorage(path: path), limits: limits, onDropped: onDropped)
        }
        // A dry run works on a copy of the queue and leaves the file as it is.
        let copy = InMemoryOutboxStorage()
        if FileManager.default.fileExists(atPath: path) {
            for entry in try SQLiteOutboxStorage.snapshot(path: path) { try copy.replace(entry) }
        }
        return try Outbox(storage: copy, limits: limits, onDropped: onDropped)
    }
}
