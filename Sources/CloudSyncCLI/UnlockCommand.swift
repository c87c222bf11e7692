import CloudSync
import CloudSyncBackup
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// `cloudsync unlock FILE --repository ID [--codec ID] [--remove-all --yes] [--json]`: removes a backup repository's
/// stale locks (or, confirmed, every lock), as restic's `unlock` does.
extension CommandLineTool {
    func unlock(_ parsed: ParsedArguments) async -> ExitCode {
        guard let (compiled, repository, codec) = repositoryTarget(parsed, Commands.unlock) else { return .usage }
        let removeAll = parsed.flag(Commands.unlockRemoveAll)
        if removeAll && !parsed.flag(Commands.unlockYes) {
            return usageError(
                "--remove-all also removes the locks of processes that may still run (a backup, or a prune on another "
                    + "machine); add --yes once you know they are gone", Commands.unlock)
        }
        let session: RunSession
        do {
            session = try await RunSession.open(compiled, access: .write)
        } catch {
            return refused(error, compiled)
        }
        let outcome: Result<(removed: [HeldLock], kept: [HeldLock]), CloudSyncError>
        do throws(CloudSyncError) {
            let opened = try await BackupRepository.open(
                in: session.store, provider: repository, codec: codec, create: false)
            outcome = .success(try await opened.unlock(removeAll: removeAll))
        } catch {
            outcome = .failure(error)
        }
        await session.close()
        let (removed, kept): ([HeldLock], [HeldLock])
        switch outcome {
        case .success(let done): (removed, kept) = done
        case .failure(let error):
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
        if parsed.flag(Commands.json) {
            standardOutput(encoded(UnlockLine(removed: removed.map(LockLine.init), kept: kept.map(LockLine.init))))
        }
        standardError("removed \(removed.count) lock\(removed.count == 1 ? "" : "s") of \(repository)\n")
        for lock in kept {
            standardError(
                "kept the lock of \(lock.holder) (\(lock.exclusive ? "exclusive" : "shared"), refreshed "
                    + "\(lock.minutesOld) min ago by the \(lock.agedByRepositoryClock ? "repository's" : "writer's") "
                    + "clock): it may still run; --remove-all --yes removes it\n")
        }
        return .success
    }
}

/// What `unlock --json` prints.
struct UnlockLine: Encodable {
    let removed: [LockLine]
    let kept: [LockLine]
}

/// One lock in `unlock --json`.
struct LockLine: Encodable {
    let object: String
    let holder: String
    let exclusive: Bool
    let minutesOld: Int64
    /// `repository` when the age is by the provider's modification times, `writer` when by the time the lock holds.
    let agedBy: String
    let stale: Bool

    init(_ lock: HeldLock) {
        object = lock.name
        holder = lock.holder
        exclusive = lock.exclusive
        minutesOld = lock.minutesOld
        agedBy = lock.agedByRepositoryClock ? "repository" : "writer"
        stale = lock.isStale
    }
}
