import CloudSync
import CloudSyncBackup
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync repair snapshots FILE --repository ID [--codec ID] [--yes] [--json]`: names the snapshot objects that do
/// not open, and with `--yes` removes them, under the pipeline's run lock and the repository's exclusive lock.
extension CommandLineTool {
    func repairSnapshots(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, codec) = repositoryTarget(parsed, Commands.repairSnapshots) else {
            return .usage
        }
        let remove = parsed.flag(Commands.repairYes)
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .write)
        } catch {
            return refused(error, compiled)
        }
        let outcome: Result<[RepositoryProblem], CloudSyncError>
        do throws(CloudSyncError) {
            let opened = try await BackupRepository.open(
                in: session.store, provider: repository, codec: codec, create: false)
            outcome = .success(
                try await opened.withLock(exclusive: true) { _ throws(CloudSyncError) in
                    try await opened.repairSnapshots(remove: remove)
                })
        } catch {
            outcome = .failure(error)
        }
        await session.close()
        let damaged: [RepositoryProblem]
        switch outcome {
        case .success(let found): damaged = found
        case .failure(let error):
            standardError("Error: \(error.code): \(error.message)\n")
            return error.code == .locked ? .locked : .jobError
        }
        if parsed.flag(Commands.json) {
            standardOutput(
                encoded(
                    damaged.map { DamagedObjectLine(object: $0.object, code: $0.code.rawValue, message: $0.message) }))
        }
        for problem in damaged { standardError("\(problem.object): \(problem.code): \(problem.message)\n") }
        guard remove || damaged.isEmpty else {
            standardError(
                "\(damaged.count) damaged snapshot object\(damaged.count == 1 ? "" : "s") in \(repository); nothing was "
                    + "removed: add --yes to remove \(damaged.count == 1 ? "it" : "them") (a prune then frees the data "
                    + "only they needed)\n")
            return .usage
        }
        standardError(
            "\(remove ? "removed" : "found") \(damaged.count) damaged snapshot object\(damaged.count == 1 ? "" : "s") "
                + "in \(repository)\n")
        return .success
    }
}

/// One damaged object in `repair snapshots --json`.
struct DamagedObjectLine: Encodable {
    let object: String
    let code: String
    let message: String
}
