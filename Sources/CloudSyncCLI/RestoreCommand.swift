import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync restore FILE --repository ID [--codec ID] [--snapshot SEL | --at TIME] (--to PROVIDER | --target DIR)
/// [--keys GLOB]... [--overwrite MODE] [--dry-run] [--json] [--report PATH|-] [--quiet]`: one restore job, run through the
/// pipeline's state, codecs and run lock without editing the file; a directory target needs no provider in it.
extension CommandLineTool {
    /// The id the `--target` directory's provider takes in the run.
    static let restoreTargetID = "restore-target"

    func restoreSnapshot(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, codec) = repositoryTarget(parsed, Commands.restore) else { return .usage }
        let file = parsed.argument(Commands.file) ?? ""
        // repositoryTarget checked it: the codec named, or the file's only one.
        _ = codec
        let codecID = parsed.value(Commands.snapshotsCodec) ?? compiled.codecs.keys.sorted().first ?? ""
        let to = parsed.value(Commands.restoreTo)
        let target = parsed.value(Commands.restoreTarget)
        guard (to == nil) != (target == nil) else {
            return usageError(
                "say where the snapshot goes: --to PROVIDER (a provider of \(file), or store) or --target DIR",
                Commands.restore)
        }
        let at = parsed.value(Commands.restoreAt)
        if let at {
            guard parsed.value(Commands.restoreSnapshot) == nil else {
                return usageError("--at and --snapshot both choose the snapshot; give one", Commands.restore)
            }
            guard ISO8601DateFormatter().date(from: at) != nil else {
                return usageError(
                    "--at takes an ISO 8601 time like 2026-12-05T02:30:00Z; found '\(at)'", Commands.restore)
            }
        }
        var providers: [(id: String, fields: [(String, PipelineAmendment.Value)])] = []
        if let target {
            let path = target.hasPrefix("/") ? target : FileManager.default.currentDirectoryPath + "/" + target
            providers.append(
                (
                    Self.restoreTargetID,
                    [("type", .text("directory")), ("path", .text(path)), ("create", .literal("true"))]
                ))
        }
        var job: [(String, PipelineAmendment.Value)] = [
            ("type", .text("restore")), ("name", .text("restore")), ("from", .text(repository)),
            ("to", .text(to ?? Self.restoreTargetID)), ("codec", .text(codecID)),
            ("snapshot", .text(at ?? parsed.value(Commands.restoreSnapshot) ?? "latest")),
        ]
        let keys = parsed.values(Commands.restoreKeys)
        if !keys.isEmpty { job.append(("keys", .list(keys))) }
        if let overwrite = parsed.value(Commands.restoreOverwrite) { job.append(("overwrite", .text(overwrite))) }
        return await runAmended(file, PipelineAmendment(providers: providers, job: job), parsed, Commands.restore)
    }
}
