import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

/// Reads a feed from `cursor` to its end: the keys it reported (last change per key) and the cursor it ended at.
func readFeed(_ provider: any Provider, since cursor: String, limit: Int = 2) async throws -> (
    changes: [String: Bool], cursor: String
)? {
    var cursor = cursor
    var changes: [String: Bool] = [:]
    while true {
        guard case .changes(let page) = try await provider.changes(since: cursor, limit: limit) else { return nil }
        for change in page.changes { changes[change.key] = change.removed }
        cursor = page.cursor
        if !page.hasMore { return (changes, cursor) }
    }
}

/// The change feeds of the local providers: every set and remove after a cursor, paged, and a cursor that cannot be
/// served answered as expired rather than as "no changes".
@Suite struct ChangeFeedTests {
    @Test func theSQLiteFeedReportsEverySetAndRemoveAfterTheCursorWhoeverWrote() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("feed.db")
        let provider = try SQLiteProvider(id: "db", path: path)
        _ = try await provider.set([KeyValue("before", "0")])
        let start = try #require(try await provider.changeFeedCursor())
        _ = try await provider.set([KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("c", "3")])
        _ = try await provider.remove(["b", "never-stored"])
        _ = try await provider.set([KeyValue("a", "1 again")])
        // Another process writing the table with plain SQL is logged too, by the triggers.
        let other = try SQLiteDatabase(path: path)
        try await other.write { db in
            try db.execute("INSERT INTO kv (key, value, updated_at_ms) VALUES ('outside', 'x', 0)")
            try db.execute("DELETE FROM kv WHERE key = 'before'")
        }
        await other.close()
        let read = try #require(try await readFeed(provider, since: start))
        #expect(read.changes == ["a": false, "b": true, "c": false, "outside": false, "before": true])
        // From the end cursor, nothing until the next write.
        #expect(try await readFeed(provider, since: read.cursor)?.changes == [:])
        _ = try await provider.set([KeyValue("later", "1")])
        #expect(try await readFeed(provider, since: read.cursor)?.changes == ["later": false])
        await provider.close()
    }

    @Test func aSQLiteCursorFromAnotherDatabaseIsExpired() async throws {
        let directory = try TemporaryDirectory()
        let first = try SQLiteProvider(id: "db", path: directory.file("one.db"))
        let second = try SQLiteProvider(id: "db", path: directory.file("two.db"))
        _ = try await first.set([KeyValue("a", "1")])
        let cursor = try #require(try await first.changeFeedCursor())
        guard case .expired(let reason) = try await second.changes(since: cursor, limit: 10) else {
            Issue.record("a cursor of another database was served")
            return
        }
        #expect(reason.contains("another database"))
        guard case .expired = try await first.changes(since: "garbage", limit: 10) else {
            Issue.record("a malformed cursor was served")
            return
        }
        await first.close()
        await second.close()
    }

    @Test func theMemoryFeedKeepsItsLastChangesAndExpiresOlderCursors() async throws {
        let provider = MemoryProvider(id: "m", changeLogLimit: 3)
        let start = try #require(try await provider.changeFeedCursor())
        _ = try await provider.set([KeyValue("a", "1"), KeyValue("b", "2")])
        #expect(try await readFeed(provider, since: start, limit: 1)?.changes == ["a": false, "b": false])
        _ = try await provider.remove(["a"])
        _ = try await provider.set([KeyValue("c", "3"), KeyValue("d", "4")])
        // Five changes, three kept: the start cursor is past the log's reach.
        guard case .expired = try await provider.changes(since: start, limit: 10) else {
            Issue.record("a cursor the log was pruned past was served")
            return
        }
        let other = MemoryProvider(id: "m")
        guard case .expired = try await other.changes(since: start, limit: 10) else {
            Issue.record("another instance's cursor was served")
            return
        }
    }

    @Test func providersWithoutAFeedSayNoneAndWrappersForwardTheirs() async throws {
        let directory = try TemporaryDirectory()
        let files = try DirectoryProvider(id: "files", root: directory.file("files"))
        #expect(try await files.changeFeedCursor() == nil)
        let wrapped = FaultInjectingProvider(MemoryProvider(id: "m"))
        let cursor = try #require(try await wrapped.changeFeedCursor())
        _ = try await wrapped.set([KeyValue("k", "v")])
        #expect(try await readFeed(wrapped, since: cursor)?.changes == ["k": false])
    }
}
