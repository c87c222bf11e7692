import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// The run lock's view of a holder that wrote no process id.
@Suite struct RunLockTests {
    /// A state directory whose lock is held for 150 ms by a descriptor no run owns, with no process id written, as a
    /// child process shares its parent's lock between fork and exec.
    func heldWithoutIDFor150Milliseconds() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        let shared = open(directory.file("run.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(flock(shared, LOCK_EX | LOCK_NB) == 0)
        Thread.detachNewThread {
            usleep(150_000)
            close(shared)
        }
        return directory
    }

    @Test func aLockReleasedByAHolderThatWroteNoIdIsTakenOnceFree() async throws {
        let directory = try heldWithoutIDFor150Milliseconds()
        // Taking it retries while the holder is about to go: on a thread of its own.
        let path = directory.path
        guard case .acquired(let lock) = try await offPool({ try RunLock.acquire(in: path) }) else {
            Issue.record("a lock freed 150 ms later was reported held")
            return
        }
        lock.release()
    }

    /// `login` asks who holds the lock rather than taking it; the same moment of a forking child's hold must not make
    /// it refuse (it did, under load, in the CLI's CloudKit test: the command before it had just released the lock).
    @Test func aHolderThatWroteNoIdIsNotReportedOnceItLetsGo() async throws {
        let directory = try heldWithoutIDFor150Milliseconds()
        let path = directory.path
        let outcome = try await offPool { RunLock.holder(in: path) }
        if case .heldBy = outcome { Issue.record("a lock freed 150 ms later was reported held") }
    }

    @Test func aLockHeldByARunNamesItsProcess() throws {
        let directory = try TemporaryDirectory()
        guard case .acquired(let first) = try RunLock.acquire(in: directory.path) else {
            Issue.record("a free lock was reported held")
            return
        }
        defer { first.release() }
        guard case .heldBy(let pid) = try RunLock.acquire(in: directory.path) else {
            Issue.record("a held lock was taken twice")
            return
        }
        #expect(pid == getpid())
        guard case .heldBy(let named) = RunLock.holder(in: directory.path) else {
            Issue.record("a held lock was reported free")
            return
        }
        #expect(named == getpid())
    }
}
