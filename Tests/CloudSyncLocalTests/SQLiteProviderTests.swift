import CloudSync
import CloudSyncLocal
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

    @Test func maxBytesIsAQuota() async throws {
        let provider = try SQLiteProvider(path: directory.file("limited.db"), maxBytes: 64 * 1024)
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
        let writer = Task.detached { try ProcessRunner.run(fixture, ["sqlite-writer", path, "3000"]) }
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
        var count = 0
        var cursor: String?
        repeat {
            let page = try await reader.listKeys(after: cursor, limit: 1000)
            count += page.keys.count
            cursor = page.nextCursor
        } while cursor != nil
        #expect(count == 3000)
        #expect(try await reader.get(["written.2999"])[0].get() == "value 2999")
        #expect(reads > 0)
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
