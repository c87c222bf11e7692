import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// The helpers tests wait with: a wait that gives up fails its own test, naming where it waited, and leaves the
/// others running; waiting for child processes holds none of the concurrency pool's few threads.
@Suite struct WaitingTests {
    @Test func aConditionNeverReachedFailsTheTestWhereItWaitedAndStopsIt() async throws {
        let line = #line + 4
        let after = Mutex(false)
        try await withKnownIssue {
            // This test's process goes on past the failure: the wait used to end it with a fatal error.
            try await waitUntil(limit: .milliseconds(50)) { false }
            after.withLock { $0 = true }
        } matching: { issue in
            guard let error = issue.error as? ConditionNotReached else { return false }
            return error.fileID == "CloudSyncTestingTests/WaitingTests.swift" && error.line == line
                && error.limit == .milliseconds(50)
                && "\(error)"
                    == "CloudSyncTestingTests/WaitingTests.swift:\(line): condition not reached within 0.05 seconds"
        }
        #expect(!after.withLock { $0 }, "the test went on past a wait that gave up")
    }

    @Test func sleepersThatNeverComeFailTheTestLikewise() async throws {
        let clock = ManualClock()
        _ = clock.schedule(after: .seconds(1)) {}
        try await withKnownIssue {
            try await clock.waitForSleepers(2, limit: .milliseconds(50))
        } matching: { issue in
            (issue.error as? ConditionNotReached)?.fileID == "CloudSyncTestingTests/WaitingTests.swift"
        }
    }

    @Test func aConditionOtherTasksReachEndsTheWait() async throws {
        let reached = Mutex(false)
        let clock = ManualClock()
        Task {
            try await clock.sleep(for: .seconds(1))
            reached.withLock { $0 = true }
        }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(1))
        try await waitUntil { reached.withLock { $0 } }
    }

    /// A cancelled wait ends with `CancellationError`, not after its limit with ``ConditionNotReached``.
    @Test func aCancelledWaitEndsAtOnce() async {
        let wait = Task { try await waitUntil(limit: .seconds(30)) { false } }
        wait.cancel()
        let result = await wait.result
        #expect(throws: CancellationError.self) { try result.get() }
    }

    /// More waits for child processes than the pool has threads, each for a process that ends only when this test
    /// signals it: were a wait to block its thread, the test could never get to the signals.
    @Test func awaitingChildProcessesLeavesThePoolFree() async throws {
        let count = 2 * ProcessInfo.processInfo.activeProcessorCount + 2
        let processes = try (0..<count).map { _ in try RunningProcess("/bin/sleep", ["60"]) }
        let waiting = Counter()
        try await withThrowingTaskGroup(of: Int32.self) { group in
            for process in processes {
                group.addTask {
                    waiting.next()
                    return await process.exited().status
                }
            }
            try await waitUntil(limit: .seconds(20)) { waiting.value == count }
            for process in processes { process.signal(SIGKILL) }
            for try await status in group { #expect(status == SIGKILL) }
        }
    }

    /// A test whose time limit runs out is cancelled: a child it waits for is killed, so the wait ends.
    @Test func cancellingAWaitForAProcessKillsIt() async throws {
        let process = try RunningProcess("/bin/sleep", ["60"])
        let wait = Task { await process.exited() }
        wait.cancel()
        #expect(await wait.value.status == SIGKILL)
        let run = Task { try await ProcessRunner.run("/bin/sleep", ["60"]) }
        run.cancel()
        #expect(try await run.value.status == SIGKILL)
    }

    @Test func aLineIsAwaitedAndTheEndOfOutputIsNil() async throws {
        let process = try RunningProcess("/bin/sh", ["-c", "echo first; echo second; echo err >&2; exit 4"])
        #expect(await process.line() == "first")
        #expect(await process.line() == "second")
        #expect(await process.line() == nil)
        let ended = await process.exited()
        #expect(ended.status == 4)
        #expect(ended.standardError == "err\n")
    }
}
