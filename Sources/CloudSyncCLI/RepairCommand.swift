import CloudSync
import CloudSyncBackup
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync repair index FILE --repository ID [--codec ID] [--json]`: rebuilds a backup repository's index from its
/// packs' own headers, under the pipeline's run lock and the repository's exclusive lock.
extension CommandLineTool {
    func repairIndex(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, codec) = repositoryTarget(parsed, Commands.repairIndex) else { return .usage }
        let session: RunSession
        do {
            // A writing session: the pipeline's run lock keeps its own backups out while the index is replaced.
            session = try await RunSession.open(compiled, access: .write)
        } catch {
            return refused(error, compiled)
        }
        let repaired: Result<IndexRepair, CloudSyncError>
        do throws(CloudSyncError) {
            let opened = try await BackupRepository.open(
                in: session.store, provider: repository, codec: codec, create: false)
            repaired = .success(
                try await opened.withLock(exclusive: true) { lock throws(CloudSyncError) in
                    try await opened.repairIndex(holding: lock)
                })
        } catch {
            repaired = .failure(error)
        }
        await session.close()
        let repair: IndexRepair
        switch repaired {
        case .success(let done): repair = done
        case .failure(let error):
            standardError("Error: \(error.code): \(error.message)\n")
            return error.code == .locked ? .locked : .jobError
        }
        if parsed.flag(Commands.json) {
            standardOutput(encoded(IndexRepairLine(repair)))
        }
        standardError(
            "repaired the index of \(repository): \(repair.packsRead) packs read, \(repair.blobsIndexed) blobs "
                + "indexed, \(repair.indexesReplaced) index objects replaced"
                + (repair.packsKeptFromOldIndex > 0
                    ? "; \(repair.packsKeptFromOldIndex) packs without a header kept as the old index had them" : "")
                + "\n")
        if !repair.packsNotIndexed.isEmpty {
            standardError(
                "\(repair.packsNotIndexed.count) packs have no header and no readable index entry, so their blobs are "
                    + "in no index: \(repair.packsNotIndexed.sorted().joined(separator: ", ")); run a verify job to "
                    + "see which snapshots need them\n")
        }
        return .success
    }
}

/// What `repair index --json` prints.
struct IndexRepairLine: Encodable {
    let packsRead: Int
    let blobsIndexed: Int
    let indexesReplaced: Int
    let packsKeptFromOldIndex: Int
    let packsNotIndexed: [String]

    init(_ repair: IndexRepair) {
        packsRead = repair.packsRead
        blobsIndexed = repair.blobsIndexed
        indexesReplaced = repair.indexesReplaced
        packsKeptFromOldIndex = repair.packsKeptFromOldIndex
        packsNotIndexed = repair.packsNotIndexed.sorted()
    }
}
