import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// A database file without its tables reads as empty.
///
/// A process killed while it created a database leaves the file without its tables (an empty file, or SQLite's
/// header alone). Read-only opens — dry runs, `outbox list` — read such a file as empty, never as `no such table`.
@Suite struct SchemalessDatabaseTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func emptyFile(_ name: String) -> String {
        let path = directory.file(name)
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        return path
    }

    @Test func anOutboxWithoutItsTableHoldsNothing() throws {
        #expect(try SQLiteOutboxStorage.snapshot(path: emptyFile("outbox.db")).isEmpty)
    }

    @Test func aReadOnlySQLiteProviderWithoutItsTableIsEmpty() async throws {
        let provider = try SQLiteProvider(id: "lite", path: emptyFile("lite.db"), readOnly: true)
        #expect(try await provider.get(["k"]).map { try $0.get() } == [nil])
        #expect(try await provider.listKeys(after: nil, limit: 10) == KeyPage(keys: [], nextCursor: nil, versions: []))
        #expect(try await provider.keyCount() == 0)
        #expect(try FileManager.default.attributesOfItem(atPath: directory.file("lite.db"))[.size] as? Int == 0)
    }
}
