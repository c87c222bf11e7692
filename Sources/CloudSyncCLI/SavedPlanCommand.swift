import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncSodium
import Foundation

extension Commands {
    static let planJob = OptionSpec.option(
        "job", short: "j", value: "NAME", completes: .jobs,
        help: "With --out: the migrate or move job to plan.")
    static let planOut = OptionSpec.option(
        "out", value: "PLAN",
        help: "Write the job's saved plan here (mode 0600): each key's action and the versions it saw, for apply.")
    static let planFile = ArgumentSpec(name: "PLAN", help: "A plan `cloudsync plan --out` wrote.")

    static let apply = CommandSpec(
        path: ["apply"],
        abstract: "Apply a saved plan exactly: its keys only, and only where nothing changed since it was made.",
        discussion: """
            Checks the plan whole (its digest) and against its pipeline file (the file's digest; a changed file is \
            refused, naming the job fields that changed), then runs the planned job in the plan's place: each key \
            planned to be copied is written only if the source and the destination still hold what the plan saw; \
            a key that changed is left untouched and counted changedSincePlan, and a key the destination already \
            holds the planned value for counts as unchanged, so applying a plan twice writes nothing the second \
            time. The report and exit status are a run's.
            """,
        arguments: [planFile],
        options: [json, runReport, runQuiet],
        exitCodes: [
            (.success, "every planned key was applied, or had been"),
            (.failure, "some keys failed, or changed since the plan and were left untouched (each is named)"),
            (.jobError, "the job could not run: a provider could not be opened"),
            (.usage, "the plan is damaged, cut short or of a changed pipeline, or the command line was wrong"),
            (.locked, "a run of the pipeline holds its lock"),
        ])
}

/// `cloudsync plan FILE --job NAME --out PLAN [--json]` and `cloudsync apply PLAN`: terraform's saved plans for key
/// sets. A plan names every key a migrate or move job would touch, with the source's and destination's versions it
/// saw; applying it does exactly that, and nothing to a key that moved since.
extension CommandLineTool {
    func savePlan(_ parsed: ParsedArguments) async -> ExitCode {
        let file = parsed.argument(Commands.file) ?? ""
        guard let out = parsed.value(Commands.planOut), let name = parsed.value(Commands.planJob) else {
            return usageError("--out needs --job NAME: the migrate or move job to plan", Commands.plan)
        }
        guard let compiled = compile(file), let bytes = FileManager.default.contents(atPath: file) else {
            return .usage
        }
        guard let job = compiled.spec.jobs.first(where: { $0.name == name }) else {
            let names = compiled.spec.jobs.map(\.name).joined(separator: ", ")
            return usageError("\(file) has no job named \(name); its jobs: \(names)", Commands.plan)
        }
        guard ["migrate", "move"].contains(job.type) else {
            return usageError(
                "job \(name) is a \(job.type) job; saved plans are made of migrate and move jobs", Commands.plan)
        }
        let header = SavedPlanHeader(
            pipeline: absolutePath(file), pipelineDigest: Hex.encode(SHA256.hash(bytes)), job: name, type: job.type,
            fields: job.job.fields.values.mapValues(\.planText),
            createdAt: ISO8601DateFormatter().string(from: Date()), salt: Hex.encode(SecureRandom.bytes(count: 16)))
        var options = RunOptions()
        options.jobNames = [name]
        options.runNeeds = false
        options.dryRun = true
        options.reportPath = "-"
        options.savedPlan = .write(header, path: absolutePath(out))
        switch await execute(compiled, options, redrawn: false) {
        case .failure(let refusal): return refused(refusal, compiled)
        case .success(let outcome):
            guard let report = outcome.report.jobs.first, report.status != .error, report.status != .interrupted else {
                let failure = outcome.report.jobs.first?.error ?? outcome.report.error
                standardError(
                    "Error: no plan was written" + (failure.map { ": \($0.code): \($0.message)" } ?? "") + "\n")
                return ExitCode(outcome.status)
            }
            await describePlan(at: out, json: parsed.flag(Commands.json))
            return ExitCode(outcome.status)
        }
    }

    /// Prints the plan at `path`: with `json`, its lines as they are; else its counts and the first 20 keys of each
    /// action.
    private func describePlan(at path: String, json: Bool) async {
        guard let reader = try? SavedPlanFile.Reader(path: path) else { return }
        if json {
            try? SavedPlanFile.forEachLine(of: path) { standardOutput($0 + "\n") }
            return
        }
        var shown: [PlannedCopy.Action: [String]] = [:]
        try? await reader.forEachBatch(of: 1_000) { batch in
            for plan in batch where shown[plan.action, default: []].count < 20 {
                let named = StoreKey(plan.target) == StoreKey(plan.key) ? plan.key : "\(plan.key) -> \(plan.target)"
                shown[plan.action, default: []].append(
                    plan.failure.map { "\(named): \($0.code): \($0.message)" } ?? named)
            }
        }
        let header = reader.header
        var text = "plan of job \(header.job) (\(header.type)) written to \(path):\n"
        for action in PlannedCopy.Action.allCases {
            let count = reader.trailer.counts[action.rawValue] ?? 0
            guard count > 0 else { continue }
            text += "  \(action.rawValue): \(count)\n"
            for line in shown[action] ?? [] { text += "    \(line)\n" }
            if count > 20 { text += "    … and \(count - 20) more (--json lists every key)\n" }
        }
        standardOutput(text + "apply it with: cloudsync apply \(path)\n")
    }

    func applySavedPlan(_ parsed: ParsedArguments) async -> ExitCode {
        let path = parsed.argument(Commands.planFile) ?? ""
        let reader: SavedPlanFile.Reader
        do throws(CloudSyncError) {
            reader = try SavedPlanFile.Reader(path: path)
        } catch {
            standardError("Error: \(error.message)\n")
            return .usage
        }
        let header = reader.header
        guard let compiled = compile(header.pipeline) else { return .usage }
        if let change = pipelineChange(since: header, compiled: compiled) {
            standardError(
                "Error: \(path) was made from \(header.pipeline) as it was then, and \(change); make a new "
                    + "plan (cloudsync plan \(header.pipeline) --job \(header.job) --out \(path)) and review it\n")
            return .usage
        }
        var options = RunOptions()
        options.jobNames = [header.job]
        options.runNeeds = false
        options.savedPlan = .apply(header, path: absolutePath(path))
        return await runWithoutProgress(compiled, options, parsed)
    }

    /// What changed in the pipeline file since the plan was made, in words; nil when it is the same file.
    private func pipelineChange(since header: SavedPlanHeader, compiled: CompiledPipeline) -> String? {
        guard let bytes = FileManager.default.contents(atPath: header.pipeline) else { return "it cannot be read now" }
        guard Hex.encode(SHA256.hash(bytes)) != header.pipelineDigest else { return nil }
        guard let job = compiled.spec.jobs.first(where: { $0.name == header.job }) else {
            return "it has no job named \(header.job) now"
        }
        let now = job.job.fields.values.mapValues(\.planText)
        var changes: [String] = []
        let names = (Array(now.keys) + header.fields.keys.filter { now[$0] == nil }).sorted()
        for name in names where now[name] != header.fields[name] {
            let was = header.fields[name].map { "'\($0)'" } ?? "not set"
            let becomes = now[name].map { "'\($0)'" } ?? "not set"
            changes.append("`\(name)` was \(was) and is \(becomes)")
        }
        if job.type != header.type { changes.insert("its type was \(header.type) and is \(job.type)", at: 0) }
        return changes.isEmpty
            ? "the file changed since (job \(header.job)'s fields did not: its providers, codecs or other jobs did)"
            : "job \(header.job) changed since: " + changes.joined(separator: "; ")
    }

    private func absolutePath(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }
}
