import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Pipelines that open the same new SQLite file at the same moment: each waits for the others (up to the busy
/// timeout) instead of failing at once while one of them switches the file to write-ahead logging or creates its
/// table.
@Suite struct SQLiteCreationRaceTests {
    @Test func openersOfTheSameNewFileAllSucceed() async throws {
        let failures = try await offPool { try race() }
        #expect(failures.isEmpty, "\(failures.count) of 160 opens failed: \(failures.prefix(5))")
    }

    /// 40 rounds of 4 threads opening one new file at once and writing to it; a line for each that failed.
    private func race() throws -> [String] {
        let directory = try TemporaryDirectory()
        let openers = 4
        var failures: [String] = []
        for attempt in 0..<40 {
            let path = directory.file("new-\(attempt).db")
            let errors = Protected<[String]>([])
            let start = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            for opener in 0..<openers {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    start.wait()
                    do {
                        let provider = try SQLiteProvider(id: "p\(opener)", path: path)
                        let written = DispatchSemaphore(value: 0)
                        Task {
                            defer { written.signal() }
                            do {
                                _ = try await provider.set([KeyValue("k\(opener)", "v")])
                            } catch {
                                errors.withLock { $0.append("opener \(opener) set: \(error)") }
                            }
                            await provider.close()
                        }
                        written.wait()
                    } catch {
                        errors.withLock { $0.append("opener \(opener): \(error)") }
                    }
                }
            }
            for _ in 0..<openers { start.signal() }
            done.wait()
            failures += errors.withLock { $0 }.map { "attempt \(attempt), \($0)" }
        }
        return failures
    }
}
