import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync forget FILE --repository ID [--codec ID] --keep-last N … [--keep-within SPAN] [--tag TAG]... [--prune]
/// [--max-unused P] [--dry-run] [--json] [--report PATH|-] [--quiet]`: one forget job, run through the pipeline's
/// state, codecs and run lock without editing the file, as `restore` runs its job.
extension CommandLineTool {
    /// The keep rules `forget` takes as options, each with the field of a forget job's `keep` it sets.
    static let forgetCounts: [(option: OptionSpec, field: String)] = [
        (Commands.forgetKeepLast, "last"), (Commands.forgetKeepHourly, "hourly"),
        (Commands.forgetKeepDaily, "daily"), (Commands.forgetKeepWeekly, "weekly"),
        (Commands.forgetKeepMonthly, "monthly"), (Commands.forgetKeepYearly, "yearly"),
    ]

    func forgetSnapshots(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, _) = repositoryTarget(parsed, Commands.forget) else { return .usage }
        let file = parsed.argument(Commands.file) ?? ""
        let codecID = parsed.value(Commands.snapshotsCodec) ?? compiled.codecs.keys.sorted().first ?? ""
        var keep: [(String, PipelineAmendment.Value)] = []
        for (option, field) in Self.forgetCounts {
            guard let text = parsed.value(option) else { continue }
            guard let count = Int(text), count >= 0 else {
                return usageError(
                    "--\(option.name) takes a count of snapshots (0 or more); found '\(text)'", Commands.forget)
            }
            keep.append((field, .literal(String(count))))
        }
        if let within = parsed.value(Commands.forgetKeepWithin) { keep.append(("within", .text(within))) }
        guard !keep.isEmpty else {
            return usageError(
                "say which snapshots to keep: --keep-last, --keep-hourly, --keep-daily, --keep-weekly, --keep-monthly, "
                    + "--keep-yearly or --keep-within (without any, forget would remove every snapshot of \(file)'s "
                    + "repository \(repository))", Commands.forget)
        }
        let tags = parsed.values(Commands.forgetTag)
        var job: [(String, PipelineAmendment.Value)] = [
            ("type", .text("forget")), ("name", .text("forget")), ("repository", .text(repository)),
            ("codec", .text(codecID)), ("keep", .mapping(keep)),
            ("prune", .literal(parsed.flag(Commands.forgetPrune) ? "true" : "false")),
        ]
        if !tags.isEmpty { job.append(("tags", .list(tags))) }
        if let maxUnused = parsed.value(Commands.forgetMaxUnused) { job.append(("maxUnused", .text(maxUnused))) }
        return await runAmended(file, PipelineAmendment(job: job), parsed, Commands.forget)
    }

    /// Runs the one job of `amendment` on `file`, as `restore` and `forget` do.
    ///
    /// `--dry-run`, `--report`, `--json` (the report on standard output, whatever the file says) and `--quiet` are
    /// taken as a run takes them. A value given on `command`'s line that holds `${` is a usage error: the file would
    /// read it as a variable.
    func runAmended(
        _ file: String, _ amendment: PipelineAmendment, _ parsed: ParsedArguments, _ command: CommandSpec
    ) async -> ExitCode {
        if let interpolated = amendment.texts.first(where: { $0.contains("${") }) {
            return usageError("'\(interpolated)' holds `${`, which a pipeline file would read as a variable", command)
        }
        guard let amended = compile(file, amendment: amendment) else { return .usage }
        var options = RunOptions()
        options.dryRun = parsed.flag(Commands.runDryRun)
        return await runWithoutProgress(amended, options, parsed)
    }
}
