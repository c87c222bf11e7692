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

    /// A file an older cloudsync wrote, whose log numbered changes with AUTOINCREMENT, is rebuilt without it when
    /// opened: a cursor taken before still reads on from where it was, and new changes number on after the old ones.
    @Test func anOlderChangeLogIsRebuiltAndItsCursorsStillRead() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("older.db")
        // The schema of the first two migrations, as an older cloudsync left it, with three changes logged.
        let older = try SQLiteDatabase(path: path)
        try await older.write { db in
            try db.executeScript(
                """
                CREATE TABLE cloudsync_migrations (name TEXT PRIMARY KEY NOT NULL, applied_at_ms INTEGER NOT NULL);
                INSERT INTO cloudsync_migrations VALUES ('create kv', 0), ('change feed', 0);
                CREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at_ms INTEGER NOT NULL)
                    WITHOUT ROWID;
                CREATE TABLE cloudsync_changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, removed INTEGER NOT NULL);
                CREATE TABLE cloudsync_feed (
                    id INTEGER PRIMARY KEY CHECK (id = 1), database_id TEXT NOT NULL, pruned_through INTEGER NOT NULL);
                INSERT INTO cloudsync_feed VALUES (1, 'olderfile', 0);
                CREATE TRIGGER cloudsync_kv_inserted AFTER INSERT ON kv BEGIN
                    INSERT INTO cloudsync_changes (key, removed) VALUES (new.key, 0);
                END;
                INSERT INTO kv VALUES ('a', '1', 0), ('b', '2', 0), ('c', '3', 0);
                """)
        }
        await older.close()

        let provider = try SQLiteProvider(id: "db", path: path)
        _ = try await provider.set([KeyValue("d", "4")])
        _ = try await provider.remove(["a"])
        let read = try #require(try await readFeed(provider, since: "olderfile:1"))
        #expect(read.changes == ["b": false, "c": false, "d": false, "a": true])
        #expect(read.cursor == "olderfile:5")
        #expect(try await provider.changeFeedCursor() == "olderfile:5")
        await provider.close()
        let schema = try await SQLiteDatabase(path: path).read { db in
            try db.query("SELECT group_concat(sql, ';') FROM sqlite_schema WHERE name LIKE 'cloudsync_changes%'") {
                $0.string(0) ?? ""
            }
        }
        #expect(schema.count == 1 && !schema[0].contains("AUTOINCREMENT") && !schema[0].isEmpty)
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
