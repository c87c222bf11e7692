import CloudSync
import CloudSyncLocal
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@Suite struct SQLiteOutboxStorageTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func entry(_ id: Int64, _ key: String, provider: String = "drive", value: String? = "v") -> OutboxEntry {
        OutboxEntry(
            id: id, key: key, operation: value == nil ? .remove : .set, encodedValue: value, provider: provider,
            attempts: 1, nextAttemptAtMs: 1000 + id, enqueuedAtMs: id, lastErrorCode: "ERR_OFFLINE")
    }

    @Test func entriesSurviveReopeningInOrder() throws {
        let path = directory.file("outbox.db")
        do {
            let storage = try SQLiteOutboxStorage(path: path)
            try storage.replace(entry(1, "a"))
            try storage.replace(entry(2, "b", value: nil))
            try storage.replace(entry(3, "c\u{0}é", value: "multi\nline ✓"))
        }
        let reopened = try SQLiteOutboxStorage(path: path)
        #expect(
            try reopened.loadAll() == [
                entry(1, "a"), entry(2, "b", value: nil), entry(3, "c\u{0}é", value: "multi\nline ✓"),
            ])
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test func aSnapshotSeesEntriesStillInTheWriteAheadLogAndWritesNothing() throws {
        let path = directory.file("outbox.db")
        let storage = try SQLiteOutboxStorage(path: path)
        // Still open: its commits are in the -wal, as they are while a run is going or after one was killed.
        try storage.replace(entry(1, "a"))
        try storage.replace(entry(2, "b", value: nil))
        try storage.replace(entry(3, "a", value: "newer"))
        try storage.delete(ids: [2])
        let database = try Data(contentsOf: URL(fileURLWithPath: path))
        let log = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
        #expect(!log.isEmpty)
        for _ in 0..<20 {
            #expect(try SQLiteOutboxStorage.snapshot(path: path) == [entry(3, "a", value: "newer")])
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == database)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path + "-wal")) == log)
        #expect(try storage.loadAll() == [entry(3, "a", value: "newer")])
    }

    @Test func afterCloseCallsFailWithERR_CLOSEDAndTheEntriesAreAllInTheFile() throws {
        let path = directory.file("outbox.db")
        let storage = try SQLiteOutboxStorage(path: path)
        try storage.replace(entry(1, "a"))
        storage.close()
        storage.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["outbox.db"])
        let errors: [CloudSyncError?] = [
            #expect(throws: CloudSyncError.self) { try storage.loadAll() },
            #expect(throws: CloudSyncError.self) { try storage.replace(entry(2, "b")) },
            #expect(throws: CloudSyncError.self) { try storage.update([entry(1, "a")]) },
            #expect(throws: CloudSyncError.self) { try storage.delete(ids: [1]) },
        ]
        #expect(errors.allSatisfy { $0?.code == .closed && $0?.message.contains(path) == true }, "\(errors)")
        #expect(try SQLiteOutboxStorage(path: path).loadAll() == [entry(1, "a")])
    }

    @Test func replaceKeepsOneEntryPerKeyAndProvider() throws {
        let storage = try SQLiteOutboxStorage(path: directory.file("outbox.db"))
        try storage.replace(entry(1, "a"))
        try storage.replace(entry(2, "a", provider: "s3"))
        try storage.replace(entry(3, "a", value: "newer"))
        #expect(try storage.loadAll().map(\.id) == [2, 3])
        var updated = entry(3, "a", value: "newer")
        updated.attempts = 5
        updated.nextAttemptAtMs = 99
        try storage.update([updated])
        try storage.delete(ids: [2, 42])
        #expect(try storage.loadAll() == [updated])
    }

    @Test func aCommitStoresAndDeletesAllOrNothing() throws {
        let path = directory.file("outbox.db")
        let storage = try SQLiteOutboxStorage(path: path)
        try storage.replace(entry(1, "a"))
        try storage.replace(entry(2, "b"))
        try storage.commit(storing: [entry(3, "c"), entry(4, "a", value: "newer")], deleting: [2, 42])
        let expected = [entry(3, "c"), entry(4, "a", value: "newer")]
        #expect(try storage.loadAll() == expected)
        // Two entries under one id: the second insert fails, and the delete and the first insert are undone with it.
        #expect(throws: (any Error).self) {
            try storage.commit(storing: [entry(5, "d"), entry(5, "e")], deleting: [3])
        }
        #expect(try storage.loadAll() == expected)
        #expect(try SQLiteOutboxStorage(path: path).loadAll() == expected)
    }

    /// Commits of every size around the hundred rows one statement writes (0, 1, 99, 100, 101, 250), with keys
    /// repeated inside a commit and across commits, removes (no value), empty and odd texts, and deletions, checked
    /// against a model of one entry per key and provider after each commit and after reopening.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func commitsOfAnySizeKeepOneEntryPerKeyAndProvider(seed: UInt64) throws {
        let path = directory.file("outbox-\(seed).db")
        let storage = try SQLiteOutboxStorage(path: path)
        var random = SeededRandom(seed: seed)
        var model: [String: OutboxEntry] = [:]
        var nextID: Int64 = 1
        for size in [0, 1, 99, 100, 101, 250, 7, 100, 199] {
            var storing: [OutboxEntry] = []
            for _ in 0..<size {
                let key = ["a", "", "k\u{0}é", "key.\(random.next() % 40)"][Int(random.next() % 4)]
                let value: String? =
                    random.next() % 5 == 0
                    ? nil : ["", "v\(random.next() % 1000)", "ünï\ncode"][Int(random.next() % 3)]
                storing.append(entry(nextID, key, provider: random.next() % 2 == 0 ? "drive" : "s3", value: value))
                nextID += 1
            }
            let known = model.values.map(\.id).sorted()
            let deleting = known.filter { _ in random.next() % 4 == 0 }
            try storage.commit(storing: storing, deleting: deleting)
            model = model.filter { !deleting.contains($0.value.id) }
            for stored in storing { model["\(stored.key)\u{1}\(stored.provider)"] = stored }
            #expect(try storage.loadAll() == model.values.sorted { $0.id < $1.id }, "after a commit of \(size)")
        }
        #expect(try SQLiteOutboxStorage(path: path).loadAll() == model.values.sorted { $0.id < $1.id })
    }

    @Test func aFailedBatchOfWritesIsOnDiskWhenTheCallReturns() async throws {
        let path = directory.file("outbox.db")
        let drive = FaultInjectingProvider(id: "drive")
        drive.fail(.set, with: CloudSyncError(.offline, "down"))
        var options = StoreOptions()
        options.outbox = try Outbox(storage: SQLiteOutboxStorage(path: path))
        let store = try CloudStore(providers: [drive], options: options)
        let items = (0..<50).map { KeyValue("key.\($0)", "value \($0)") }
        let results = try await store.multiSet(items)
        #expect(results.allSatisfy { (try? $0.get())?.queued == ["drive"] })
        // Read by another connection while the writer's is still open: the entries are committed.
        let reread = try SQLiteOutboxStorage.snapshot(path: path)
        #expect(reread.map(\.key) == items.map(\.key))
        #expect(reread.map(\.encodedValue) == items.map(\.value))
        #expect(reread == store.pendingWrites().map(\.entry))
    }

    @Test func anOutboxReopenedOnTheSameFileHoldsItsQueue() async throws {
        let path = directory.file("outbox.db")
        let drive = FaultInjectingProvider(id: "drive")
        drive.fail(.set, with: CloudSyncError(.offline, "down"))
        do {
            var options = StoreOptions()
            options.outbox = try Outbox(storage: SQLiteOutboxStorage(path: path))
            let store = try CloudStore(providers: [drive], options: options)
            for key in ["a", "b"] { try await store.set("value of \(key)", forKey: key) }
        }
        drive.fail(.set, with: CloudSyncError(.offline, "down"), times: 0)
        var options = StoreOptions()
        let clock = ManualClock(milliseconds: SystemClock().nowMilliseconds())
        options.clock = clock
        options.outbox = try Outbox(storage: SQLiteOutboxStorage(path: path))
        let store = try CloudStore(providers: [drive], options: options)
        #expect(store.pendingWrites().map(\.key) == ["a", "b"])
        clock.advance(by: .seconds(86_400))
        #expect(try await store.flushOutbox() == FlushResult(drained: 2, remaining: 0, dropped: 0))
        #expect(try await drive.get(["a"])[0].get() == "value of a")
        #expect(try Outbox(storage: SQLiteOutboxStorage(path: path)).pending.isEmpty)
    }

    @Test func aFileThatIsNotADatabaseIsRefusedAndKept() throws {
        let path = directory.file("outbox.db")
        try Data("not a database at all, just some text that is long enough".utf8).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: SQLiteError.self) { try SQLiteOutboxStorage(path: path) }
        #expect(error?.code.primary == .notADatabase)
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("not a database"))
    }
}

@Suite struct OutboxCrashTests {
    /// The writer is killed with SIGKILL at random moments; every key whose write call had returned (and so was
    /// printed) must be in the reopened outbox, and the file must pass SQLite's integrity check.
    @Test func everyReturnedWriteSurvivesSIGKILL() async throws {
        let writer = try ProcessRunner.builtProduct("cloudsync-test-fixture")
        let directory = try TemporaryDirectory()
        var random = SystemRandomNumberGenerator()
        var totalConfirmed = 0
        for run in 0..<50 {
            let path = directory.file("outbox-\(run).db")
            let waitForLines = Int.random(in: 0...40, using: &random)
            let extraMicroseconds = UInt32.random(in: 0...20_000, using: &random)
            let printed = try await killMidWrite(
                writer, path: path, afterLines: waitForLines, extraMicroseconds: extraMicroseconds)
            let storage = try SQLiteOutboxStorage(path: path)
            #expect(try storage.integrityCheck() == "ok", "run \(run)")
            let stored = Set(try storage.loadAll().map(\.key))
            let missing = printed.filter { !stored.contains($0) }
            #expect(
                missing.isEmpty,
                "run \(run): \(missing.count) of \(printed.count) confirmed writes lost: \(missing.prefix(5))")
            totalConfirmed += printed.count
        }
        #expect(totalConfirmed > 0)
    }

    /// Starts the writer, reads its confirmations until `afterLines` have arrived (plus a random extra moment), kills
    /// it, and returns every key it confirmed before dying.
    ///
    /// Runs on its own thread: the reads block.
    private func killMidWrite(_ writer: String, path: String, afterLines: Int, extraMicroseconds: UInt32) async throws
        -> [String]
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: writer)
                    process.arguments = ["outbox-writer", path]
                    let output = Pipe()
                    process.standardOutput = output
                    process.standardError = FileHandle.nullDevice
                    try process.run()
                    var received = Data()
                    while received.filter({ $0 == UInt8(ascii: "\n") }).count < afterLines {
                        let chunk = output.fileHandleForReading.availableData
                        if chunk.isEmpty { break }
                        received += chunk
                    }
                    usleep(extraMicroseconds)
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                    received += output.fileHandleForReading.readDataToEndOfFile()
                    // A line cut short by the kill was never confirmed.
                    let text = String(decoding: received, as: UTF8.self)
                    let lines = text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
                    continuation.resume(returning: text.hasSuffix("\n") ? lines : Array(lines.dropLast()))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
