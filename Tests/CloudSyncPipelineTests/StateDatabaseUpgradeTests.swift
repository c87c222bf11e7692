import CloudSync
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// A state database an older cloudsync wrote, read by a dry run of this one.
@Suite struct StateDatabaseUpgradeTests {
    /// A state database holding only the first migration, as the version before sync snapshots left it.
    func olderStateDatabase(in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("state.db")
        let database = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false))
        try SQLiteMigrator([StateDatabase.migrations.migrations[0]]).migrate(database)
        database.close()
        return path
    }

    @Test func aDryRunReadsAnOlderStateDatabaseWithoutChangingIt() throws {
        let directory = try TemporaryDirectory()
        let path = try olderStateDatabase(in: directory)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let state = try StateDatabase(path: path, readOnly: true)
        // The sync tables came later: a dry run sees them empty rather than failing with "no such table".
        #expect(try state.hasSynced("nightly") == false)
        #expect(try state.syncCursors(of: "nightly").isEmpty)
        #expect(try state.snapshotRows(of: "nightly", after: nil, limit: 10).isEmpty)
        state.close()

        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(leftovers == ["state.db"])
    }
}
