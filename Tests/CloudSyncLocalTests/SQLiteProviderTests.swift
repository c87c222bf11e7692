import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@Suite struct SQLiteProviderTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func conformsToTheProviderContract() async throws {
        let directory = self.directory
        let counter = Counter()
        let failures = await ProviderConformanceSuite.run {
            try SQLiteProvider(path: directory.file("conformance-\(counter.next()).db"))
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// A database another process keeps locked while it is being opened is the retryable ERR_TIMEOUT, not a
    /// configuration error about a CREATE TABLE.
    @Test func aDatabaseLockedWhileOpeningIsARetryableTimeout() throws {
        let path = directory.file("busy.db")
        // A new, empty database another connection holds an exclusive lock on, as a second process would.
        let holder = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false))
        try holder.read { db in try db.executeScript("BEGIN EXCLUSIVE") }
        let error = #expect(throws: CloudSyncError.self) { try SQLiteProvider(id: "busy", path: path) }
        #expect(error?.code == .timeout)
        #expect(error?.isRetryable == true)
        #expect(error?.message.contains("stayed locked by another process") == true)
        try holder.read { db in try db.executeScript("ROLLBACK") }
    }

    @Test func createsItsDirectoryAndFileOwnerOnly() throws {
        let path = directory.file("state/nested/primary.db")
        _ = try SQLiteProvider(path: path)
        let file = try FileManager.default.attributesOfItem(atPath: path)
        let folder = try FileManager.default.attributesOfItem(atPath: directory.file("state/nested"))
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test func pagingOver10000KeysWhileAnotherTaskWrites() async throws {
        let provider = try SQLiteProvider(path: directory.file("paging.db"))
        let keys = (0..<10_000).map { String(format: "key.%05d", $0) }
        for start in stride(from: 0, to: keys.count, by: 500) {
            _ = try await provider.set(keys[start..<start + 500].map { KeyValue($0, "v") })
        }
        let writer = Task {
            for index in 0..<2_000 { _ = try await provider.set([KeyValue("new.\(index)", "x")]) }
        }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 700)
            #expect(page.keys.count <= 700)
            seen += page.keys
            cursor = page.nextCursor
        } while cursor != nil
        try await writer.value
        let listed = seen.filter { $0.hasPrefix("key.") }
        #expect(listed == keys)  // every key once, in order
        #expect(Set(seen).count == seen.count)
    }

    /// A batch goes a hundred rows per statement and the rest one at a time: a key given twice, in one statement or
    /// two, ends with its last value, and every write is in the change log, in order.
    @Test func aBatchWritesEveryRowInOrderWhateverStatementCarriesIt() async throws {
        let path = directory.file("batch.db")
        let provider = try SQLiteProvider(path: path)
        // 250 items: two statements of a hundred rows, then fifty alone; keys 0-119 come twice, some in the same
        // statement, some across statements, one in a statement and again alone; one value is empty.
        let items = (0..<250).map { index in
            KeyValue("k.\(index % 130)", index == 7 ? "" : "value \(index) — ✓")
        }
        let results = try await provider.set(items)
        #expect(results.count == 250 && results.allSatisfy { (try? $0.get()) != nil })
        let keys = (0..<130).map { "k.\($0)" }
        var expected: [String: String] = [:]
        for item in items { expected[item.key] = item.value }
        let stored = try await provider.get(keys).map { try $0.get() }
        #expect(stored == keys.map { expected[$0] })
        await provider.close()
        let logged = try await SQLiteDatabase(path: path).read { db in
            try db.query("SELECT key FROM cloudsync_changes ORDER BY seq") { $0.string(0) ?? "" }
        }
        #expect(logged == items.map(\.key))
    }

    @Test func maxBytesIsAQuota() async throws {
        let provider = try SQLiteProvider(path: directory.file("limited.db"), maxBytes: 64 * 1024, pageSize: 4_096)
        let quota = try #require(try await provider.quota())
        #expect(quota.totalBytes == Int64(65_536))
        #expect((quota.usedBytes ?? 0) > 0)
        let big = String(repeating: "x", count: 20 * 1024)
        var results: [Result<Void, CloudSyncError>] = []
        for index in 0..<5 { results += try await provider.set([KeyValue("big.\(index)", big)]) }
        let failures = results.compactMap { result -> CloudSyncError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        #expect(!failures.isEmpty)
        #expect(failures.allSatisfy { $0.code == .quotaExceeded })
        #expect(failures.first?.message.contains("65536 bytes") == true)
        // Overwriting a value with a smaller one still works when full.
        #expect(try await provider.set([KeyValue("big.0", "small")]).allSatisfy { (try? $0.get()) != nil })
        let after = try #require(try await provider.quota())
        #expect(after.usedBytes! <= 64 * 1024)
    }

    /// Values of 1 KB fit whole in a page of a new database, where SQLite's default 4 KiB pages gave each an overflow
    /// page of its own (4.7 times the bytes stored); a database made with 4 KiB pages keeps them.
    @Test func aNewDatabaseStoresValuesOfAKilobyteWhole() async throws {
        let values = (0..<400).map {
            KeyValue(String(format: "settings/item-%04d", $0), String(repeating: "v", count: 1024))
        }
        let fresh = try SQLiteProvider(path: directory.file("fresh.db"))
        #expect(try await fresh.set(values).allSatisfy { (try? $0.get()) != nil })
        let used = try #require(try await fresh.quota()?.usedBytes)
        let stored = Int64(values.count * 1_050)
        #expect(used <= stored * 3 / 2 + SQLiteProvider.emptyDatabaseBytes(), "\(used) bytes for \(stored)")
        await fresh.close()

        let old = directory.file("old.db")
        let made = try SQLiteProvider(path: old, pageSize: 4_096)
        await made.close()
        let reopened = try SQLiteProvider(path: old)
        #expect(try await reopened.set(values).allSatisfy { (try? $0.get()) != nil })
        let oldUsed = try #require(try await reopened.quota()?.usedBytes)
        #expect(oldUsed > stored * 4, "4 KiB pages kept: \(oldUsed) bytes for \(stored)")
        await reopened.close()
    }

    @Test func withoutMaxBytesTheTotalIsUnknownNotZero() async throws {
        let provider = try SQLiteProvider(path: directory.file("open.db"))
        #expect(try await provider.quota()?.totalBytes == nil)
    }

    @Test func aFileThatIsNotADatabaseIsRefusedByPathAndKept() throws {
        let path = directory.file("notes.db")
        let contents = Data(String(repeating: "my notes, not a database\n", count: 100).utf8)
        try contents.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: CloudSyncError.self) { try SQLiteProvider(id: "primary", path: path) }
        #expect(error?.code == .config)
        #expect(error?.provider == "primary")
        #expect(error?.message.hasPrefix("\(path) is not a usable SQLite database") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == contents)
    }

    /// A path SQLite cannot open says which code and which system error stopped it, so a failure seen once in a
    /// log can be told apart from another (a directory, a full disk, a descriptor closed under SQLite).
    @Test func aPathThatCannotBeOpenedNamesSQLitesCodeAndTheSystemError() throws {
        let path = directory.file("a-directory.db")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let error = #expect(throws: CloudSyncError.self) { try SQLiteProvider(id: "primary", path: path) }
        #expect(error?.code == .config)
        #expect(error?.provider == "primary")
        #expect(
            error?.message.hasPrefix("cannot open \(path): disk I/O error (SQLite code 266") == true,
            "\(error?.message ?? "")")
        #expect(
            error?.message.contains("errno \(EISDIR): \(String(cString: strerror(EISDIR)))") == true,
            "\(error?.message ?? "")")
    }

    @Test func aDatabaseWithACorruptedHeaderIsRefused() async throws {
        let path = directory.file("corrupt.db")
        do {
            let provider = try SQLiteProvider(path: path)
            _ = try await provider.set([KeyValue("k", "v")])
        }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 0)
        handle.write(Data(repeating: 0x41, count: 100))
        try handle.close()
        try? FileManager.default.removeItem(atPath: path + "-wal")
        let error = #expect(throws: CloudSyncError.self) { try SQLiteProvider(path: path) }
        #expect(error?.message.contains(path) == true)
    }

    @Test func anotherProcessWritesWhileThisOneReads() async throws {
        let path = directory.file("shared.db")
        let reader = try SQLiteProvider(id: "reader", path: path)
        let fixture = try ProcessRunner.builtProduct("cloudsync-test-fixture")
        let writer = Task.detached { try await ProcessRunner.run(fixture, ["sqlite-writer", path, "3000"]) }
        var reads = 0
        while true {
            // Reads and listings never fail while the other process writes; they see a consistent prefix.
            let page = try await reader.listKeys(after: nil, limit: 100)
            _ = try await reader.get(page.keys)
            reads += 1
            if let finished = try? await withTimeout(writer) {
                #expect(finished.standardOutput == "done\n")
                break
            }
        }
        #expect(try await listEveryKey(of: reader).count == 3000)
        #expect(try await reader.get(["written.2999"])[0].get() == "value 2999")
        #expect(reads > 0)
    }

    @Test func afterCloseItSaysClosedEveryCallFailsWithERR_CLOSEDAndOnlyTheFileRemains() async throws {
        let path = directory.file("closing/primary.db")
        let provider = try SQLiteProvider(id: "primary", path: path)
        _ = try await provider.set([KeyValue("k", "v")])
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(await provider.availability() == .available)
        await provider.close()
        await provider.close()
        let availability = await provider.availability()
        #expect(availability.reason == .closed)
        #expect(availability.description.contains(path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("closing")) == ["primary.db"])
        let errors = await ProviderConformanceSuite.errorsAfterClose(provider)
        #expect(errors.allSatisfy { $0?.code == .closed && $0?.provider == "primary" }, "\(errors)")
        #expect(errors.first??.message.contains("was closed") == true)
        let reopened = try SQLiteProvider(path: path)
        #expect(try await reopened.get(["k"])[0].get() == "v")
        await reopened.close()
    }

    @Test func aStoreOverAClosedProviderFallsThroughToTheNextOne() async throws {
        let closed = try SQLiteProvider(id: "primary", path: directory.file("primary.db"))
        await closed.close()
        let backup = MemoryProvider(id: "backup")
        let store = try CloudStore(providers: [closed, backup])
        _ = try await store.set("v", forKey: "k")
        #expect(try await backup.get(["k"])[0].get() == "v")
        #expect(try await store.get("k") == "v")
    }

    /// Every key and value of `provider`, read page by page as the runner's jobs do.
    private func contents(of provider: SQLiteProvider) async throws -> [String: String] {
        var items: [String: String] = [:]
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 64)
            for (key, value) in zip(page.keys, try await provider.get(page.keys)) { items[key] = try value.get() }
            cursor = page.nextCursor
        } while cursor != nil
        return items
    }

    /// A database whose older rows were checkpointed into the file by a clean close and whose newer changes sit only
    /// in the write-ahead log, because the writer is still open (an app, or a run that was killed); and the rows a
    /// reader must see.
    private func databaseWithCommittedRowsInTheLog(_ path: String) async throws -> (
        writer: SQLiteProvider, expected: [String: String]
    ) {
        var expected: [String: String] = [:]
        do {
            let first = try SQLiteProvider(path: path)
            let items = (0..<300).map { KeyValue("key.\($0)", "old \($0)") }
            _ = try await first.set(items)
            for item in items { expected[item.key] = item.value }
            await first.close()
        }
        let writer = try SQLiteProvider(path: path)
        let changed =
            (0..<100).map { KeyValue("key.\($0)", "new \($0)") } + (300..<400).map { KeyValue("key.\($0)", "added") }
        _ = try await writer.set(changed)
        for item in changed { expected[item.key] = item.value }
        let removed = (250..<300).map { "key.\($0)" }
        _ = try await writer.remove(removed)
        for key in removed { expected[key] = nil }
        return (writer, expected)
    }

    @Test func aReadOnlyOpenSeesEveryRowCommittedToTheWriteAheadLog() async throws {
        let live = directory.file("live/data.db")
        let (writer, expected) = try await databaseWithCommittedRowsInTheLog(live)
        let log = try FileManager.default.attributesOfItem(atPath: live + "-wal")
        #expect(((log[.size] as? NSNumber)?.intValue ?? 0) > 0)
        var failures: [String] = []
        for attempt in 0..<20 {
            // Fresh copies, half of them without the shared-memory index (as after a reboot cleared it).
            let copy = directory.file("copy-\(attempt)/data.db")
            try FileManager.default.createDirectory(
                atPath: directory.file("copy-\(attempt)"), withIntermediateDirectories: true)
            for suffix in ["", "-wal"] + (attempt.isMultiple(of: 2) ? ["-shm"] : []) {
                try FileManager.default.copyItem(atPath: live + suffix, toPath: copy + suffix)
            }
            do {
                let reader = try SQLiteProvider(path: copy, readOnly: true)
                let read = try await contents(of: reader)
                if read != expected {
                    let wrong = Set(read.keys).union(expected.keys).filter { read[$0] != expected[$0] }
                    failures.append("copy \(attempt): \(wrong.count) of \(expected.count) keys read wrong")
                }
            } catch {
                failures.append("copy \(attempt): \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of 20 read-only opens failed: \(failures)")
        await writer.close()
    }

    /// The task's value if it has finished, without waiting for it otherwise.
    private func withTimeout(_ task: Task<ProcessResult, any Error>) async throws -> ProcessResult? {
        try await withThrowingTaskGroup(of: ProcessResult?.self) { group in
            group.addTask { try await task.value }
            group.addTask {
                try await Task.sleep(for: .milliseconds(5))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
    }
}
