import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncLocal

/// SQLite databases and directories check a conditional change under their own lock, which every provider instance
/// on the same file or tree takes: two instances stand for two processes.
@Suite struct ConditionalLocalWriteTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func compareAndSwapLosesNoIncrementAcrossTwoConnectionsToOneDatabase() async throws {
        let path = directory.file("counter.db")
        let first = try SQLiteProvider(id: "first", path: path)
        let second = try SQLiteProvider(id: "second", path: path)
        _ = try await first.set([KeyValue("n", "0")])
        let total = try await ConditionalCounter.run(
            writers: [first, second, first, second, first, second], increments: 25)
        #expect(total == 150)
        await first.close()
        await second.close()
    }

    @Test func compareAndSwapLosesNoIncrementAcrossTwoProvidersOnOneDirectory() async throws {
        let root = directory.file("tree")
        let first = try DirectoryProvider(id: "first", root: root)
        let second = try DirectoryProvider(id: "second", root: root)
        _ = try await first.set([KeyValue("n", "0")])
        let total = try await ConditionalCounter.run(
            writers: [first, second, first, second, first, second], increments: 25)
        #expect(total == 150)
    }

    /// A file another program replaced after it was read (a new file renamed over it, as editors save) is left as it
    /// is now by a removal on the condition of the version read.
    @Test func aDirectoryRemovalAsReadLeavesAFileReplacedSince() async throws {
        let root = directory.file("edited")
        let provider = try DirectoryProvider(root: root)
        _ = try await provider.set([KeyValue("notes", "draft")])
        let read = try #require(try await provider.getVersioned(["notes"])[0].get())
        let version = try #require(read.version)
        let replacement = root + "/notes.new"
        try "final".write(toFile: replacement, atomically: false, encoding: .utf8)
        #expect(rename(replacement, root + "/notes") == 0)
        let removed = try await provider.remove(["notes"], conditions: [.version(version)])
        guard case .failure(let error) = removed[0] else {
            Issue.record("the replaced file was removed")
            return
        }
        #expect(error.code == .changedSinceRead)
        #expect(try await provider.get(["notes"])[0].get() == "final")
    }
}
