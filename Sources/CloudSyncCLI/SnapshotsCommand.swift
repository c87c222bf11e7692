import CloudSync
import CloudSyncBackup
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync snapshots FILE --repository ID [--codec ID] [--json]`: the snapshots of a backup repository.
///
/// Opens the pipeline's providers without its run lock (listing writes nothing), then the repository with the codec
/// named, or the file's only codec.
extension CommandLineTool {
    func snapshots(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, codec) = repositoryTarget(parsed, Commands.snapshots) else { return .usage }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .dryRun)
        } catch {
            return refused(error, compiled)
        }
        let listed: [SnapshotSummary]
        let damaged: [RepositoryProblem]
        do {
            let opened = try await BackupRepository.open(
                in: session.store, provider: repository, codec: codec, create: false)
            (listed, damaged) = try await opened.snapshotListing()
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            await session.close()
            return .jobError
        }
        await session.close()
        if parsed.flag(Commands.json) {
            standardOutput(encoded(listed.map(SnapshotLine.init)))
        } else {
            for snapshot in listed {
                let line = SnapshotLine(snapshot)
                standardOutput(
                    "\(snapshot.id.prefix(8))  \(line.time)  \(line.host)  \(line.pipeline)  \(line.source)  "
                        + "\(line.keys) keys  \(line.bytes) bytes"
                        + (line.missed > 0 ? "  (\(line.missed) keys missed)" : "")
                        + (line.tags.isEmpty ? "" : "  [\(line.tags.joined(separator: ", "))]")
                        + "\n")
            }
        }
        // A damaged snapshot object hides no other: each is named, and the exit status says the listing is partial.
        for problem in damaged {
            standardError(
                "Error: \(problem.code): \(problem.message); the other snapshots are listed (a verify job names every "
                    + "damaged object)\n")
        }
        standardError("\(listed.count) snapshot\(listed.count == 1 ? "" : "s") in \(repository)\n")
        return damaged.isEmpty ? .success : .failure
    }
}

extension CommandLineTool {
    /// The pipeline, the repository's provider and the codec that opens it, as `--repository` and `--codec` name
    /// them (the codec defaults to the file's only one); nil, after a usage error naming what is wrong, when one is
    /// missing or unknown.
    func repositoryTarget(_ parsed: ParsedArguments, _ command: CommandSpec)
        -> (CompiledPipeline, String, any ValueCodec)?
    {
        let file = parsed.argument(Commands.file) ?? ""
        guard let compiled = compile(file) else { return nil }
        let repository = parsed.value(Commands.snapshotsRepository) ?? ""
        let ids = compiled.spec.providers.map(\.id)
        guard ids.contains(repository) else {
            var message = "no provider '\(repository)' in \(file); its providers: " + ids.joined(separator: ", ")
            if let guess = closest(repository, among: ids) { message += "; did you mean '\(guess)'?" }
            _ = usageError(message, command)
            return nil
        }
        let codecs = compiled.codecs.keys.sorted()
        guard let codecID = parsed.value(Commands.snapshotsCodec) ?? (codecs.count == 1 ? codecs[0] : nil) else {
            _ = usageError(
                codecs.isEmpty
                    ? "\(file) declares no codec, and a backup repository is opened by one"
                    : "\(file) declares several codecs (\(codecs.joined(separator: ", "))); say which opens the "
                        + "repository with --codec", command)
            return nil
        }
        guard let codec = compiled.codecs[codecID] else {
            _ = usageError("no codec '\(codecID)' in \(file); its codecs: \(codecs.joined(separator: ", "))", command)
            return nil
        }
        return (compiled, repository, codec)
    }
}

/// What `snapshots --json` prints for one snapshot; its time in ISO 8601 UTC.
struct SnapshotLine: Encodable {
    let id: String
    let time: String
    let host: String
    let pipeline: String
    let source: String
    let tags: [String]
    let keys: Int
    let bytes: Int
    /// Keys the backup could not read, left out of the snapshot.
    let missed: Int

    init(_ snapshot: SnapshotSummary) {
        id = snapshot.id
        time = isoTimestamp(snapshot.time)
        host = snapshot.host
        pipeline = snapshot.pipeline
        source = snapshot.source
        tags = snapshot.tags
        keys = snapshot.keys
        bytes = snapshot.bytes
        missed = snapshot.missed
    }
}
