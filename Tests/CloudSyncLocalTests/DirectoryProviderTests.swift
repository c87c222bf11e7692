import CloudSync
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@testable import CloudSyncLocal

@Suite struct DirectoryProviderTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func conformsToTheProviderContract() async throws {
        let directory = self.directory
        let counter = Counter()
        let failures = await ProviderConformanceSuite.run {
            try DirectoryProvider(root: directory.file("conformance-\(counter.next())"))
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// A listing tags each key file with its version once the file's last change is older than the racy window.
    ///
    /// The tag moves with an edit by anyone: this provider's writes (a new file renamed over the key) and an edit in
    /// place of the same size by another program. A file changed within the window is untagged, so it is read.
    @Test func aListingTagsSettledFilesAndTheTagMovesWithEveryEdit() async throws {
        // The provider's clock: stopped at a set time, or the real one moved on by a shift.
        let stopped = Mutex<Int64?>(nil)
        let shift = Mutex<Int64>(0)
        let provider = try DirectoryProvider(
            id: "directory", root: directory.file("files"), maxValueBytes: nil, metrics: ProviderMetrics(),
            removesStaleTemporaryFiles: false,
            fileTimeNow: { stopped.withLock { $0 } ?? FileVersion.now() + shift.withLock { $0 } })
        func tags() async throws -> [String?] {
            let page = try await provider.listKeys(after: nil, limit: 10)
            return page.versions ?? []
        }
        _ = try await provider.set([KeyValue("a", "first"), KeyValue("b", "other")])
        // Half a window after the later change, however long the machine took to get here.
        var changed: Int64 = 0
        for name in ["a", "b"] {
            var status = stat()
            #expect(lstat(directory.file("files/\(name)"), &status) == 0)
            changed = max(changed, Int64(status.st_ctim.tv_sec) * 1_000_000_000 + Int64(status.st_ctim.tv_nsec))
        }
        stopped.withLock { $0 = changed + FileVersion.racyWindowNanoseconds / 2 }
        #expect(try await tags() == [nil, nil], "just written: inside the window")
        stopped.withLock { $0 = nil }

        shift.withLock { $0 = 3 * FileVersion.racyWindowNanoseconds }
        let settled = try await tags()
        #expect(settled.allSatisfy { $0 != nil })
        #expect(try await tags() == settled, "a tag holds while nothing changes")

        _ = try await provider.set([KeyValue("a", "again")])
        // An edit in place by another program, the same size, its modification time set back as `touch -r` does:
        // only the change time tells.
        let path = directory.file("files/b")
        var before = stat()
        #expect(lstat(path, &before) == 0)
        // Until the file system's clock has ticked past b's last change (a few milliseconds), an edit could carry the
        // same change time: the case the window exists for, which the shifted clock above stepped over.
        let probe = directory.file("probe")
        var probed = stat()
        repeat {
            FileManager.default.createFile(atPath: probe, contents: nil)
            _ = lstat(probe, &probed)
        } while (probed.st_ctim.tv_sec, probed.st_ctim.tv_nsec) <= (before.st_ctim.tv_sec, before.st_ctim.tv_nsec)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.write(contentsOf: Data("OTHER".utf8))
        try handle.close()
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        shift.withLock { $0 = 6 * FileVersion.racyWindowNanoseconds }
        let edited = try await tags()
        #expect(edited[0] != nil && edited[0] != settled[0], "this provider's write: a new file")
        #expect(edited[1] != nil && edited[1] != settled[1], "an edit in place, mtime set back")
    }

    /// A listing gives every file's size, whether or not it gives the file a tag yet (a file changed in the last two
    /// seconds gets none), so a backup takes a large file through the file API before reading it.
    @Test func aListingGivesEveryFilesSize() async throws {
        let provider = try DirectoryProvider(root: directory.file("sized"))
        _ = try await provider.set([KeyValue("empty", ""), KeyValue("small", "abc"), KeyValue("ünï", "ünï")])
        let page = try await provider.listKeys(after: nil, limit: 10)
        #expect(page.keys == ["empty", "small", "ünï"])
        #expect(page.sizes == [0, 3, 5])
    }

    /// A listing gives every file's modification time, to the millisecond: what a backup repository ages its locks
    /// by, whatever the writers' clocks say.
    @Test func aListingGivesEveryFilesModificationTime() async throws {
        let root = directory.file("timed")
        let provider = try DirectoryProvider(root: root)
        _ = try await provider.set([KeyValue("old", "a"), KeyValue("fresh", "b")])
        let file = try #require(
            try FileManager.default.subpathsOfDirectory(atPath: root).first { $0.hasSuffix("old") })
        let past = Date(timeIntervalSince1970: 1_577_934_245.678)
        try FileManager.default.setAttributes([.modificationDate: past], ofItemAtPath: root + "/" + file)
        let page = try await provider.listKeys(after: nil, limit: 10)
        #expect(page.keys == ["fresh", "old"])
        #expect(page.modified?[1] == 1_577_934_245_678)
        #expect(page.modified?[0].map { $0 > 1_577_934_245_678 } == true)
    }

    @Test func valuesArePlainFilesOtherToolsCanRead() async throws {
        let root = directory.file("backup")
        let provider = try DirectoryProvider(root: root)
        _ = try await provider.set([KeyValue("settings.theme", #"{"theme":"dark"}"#), KeyValue("Favourites", "[1,2]")])
        #expect(try String(contentsOfFile: root + "/settings.theme", encoding: .utf8) == #"{"theme":"dark"}"#)
        #expect(try String(contentsOfFile: root + "/%46avourites", encoding: .utf8) == "[1,2]")
        let attributes = try FileManager.default.attributesOfItem(atPath: root)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test func listingIsInBytewiseKeyOrderNotInTheOrderOfEncodedNames() async throws {
        let provider = try DirectoryProvider(root: directory.file("ordered"))
        // Encoded, `A` is `%41` and sorts before `0`; a 300-byte key is split into directories.
        let keys = ["0", "A", "a", "Zebra", "~", "é", " space", "a.b", String(repeating: "L", count: 300), "b"]
        _ = try await provider.set(keys.map { KeyValue($0, "v") })
        #expect(try await listEveryKey(of: provider, pageSize: 3) == keys.sorted(by: StoreKey.bytesPrecede))
        #expect(provider.capabilities.listsInKeyOrder)
    }

    @Test func hostileKeysStayInsideTheRoot() async throws {
        let root = directory.file("root")
        let outside = directory.file("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let provider = try DirectoryProvider(root: root)
        let hostile = [
            "..", ".", "../outside/escaped", "/etc/passwd", "a/../../outside/x", "nul\u{0}byte", ".hidden",
            "..\\..\\win",
            "%2E%2E", "+piece", "=piece", "CaseKey", "casekey", String(repeating: "../", count: 200), "~/home", " ",
        ]
        let results = try await provider.set(hostile.map { KeyValue($0, "value of \($0.debugDescription)") })
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["outside", "root"])
        let values = try await provider.get(hostile).map { try $0.get() }
        #expect(values == hostile.map { "value of \($0.debugDescription)" })
        let listed = try await listEveryKey(of: provider, pageSize: 4)
        #expect(Set(listed) == Set(hostile))
        #expect(listed.count == hostile.count)
    }

    @Test func aLeftoverTemporaryFileIsIgnored() async throws {
        let root = directory.file("root")
        let provider = try DirectoryProvider(root: root)
        _ = try await provider.set([
            KeyValue("k", "committed"), KeyValue(String(repeating: "long", count: 100), "long value"),
        ])
        // A crash between writing the temporary file and renaming it leaves this behind.
        try "half-written".write(toFile: root + "/.tmp-0123456789abcdef", atomically: false, encoding: .utf8)
        let piece = try #require(try FileManager.default.contentsOfDirectory(atPath: root).first { $0.hasPrefix("+") })
        try "torn".write(toFile: root + "/" + piece + "/.tmp-feedface", atomically: false, encoding: .utf8)
        try "not ours".write(toFile: root + "/README.TXT", atomically: false, encoding: .utf8)
        let page = try await provider.listKeys(after: nil, limit: 100)
        #expect(Set(page.keys) == ["k", String(repeating: "long", count: 100)])
        #expect(try await provider.get(["k"])[0].get() == "committed")
    }

    @Test func mappingRoundTripsRandomKeysAndStaysDistinctIgnoringCase() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aA.zZ09_-/%+= é日🌍\u{0}\n\\:*?\"<>|")
        var seenFolded = Set<String>()
        var keys = Set<String>()
        for _ in 0..<2000 {
            let length = Int.random(in: 1..<(Bool.random(using: &generator) ? 12 : 400), using: &generator)
            let key = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            guard keys.insert(key).inserted else { continue }
            let encoded = FileNameMapping.encode(key)
            #expect(FileNameMapping.decode(encoded) == key)
            #expect(seenFolded.insert(encoded.lowercased()).inserted, "\(key.debugDescription) collides ignoring case")
            for component in FileNameMapping.components(of: encoded) {
                #expect(!component.hasPrefix("."))
                #expect(!component.contains("/"))
                #expect(!component.utf8.contains(0))
                #expect(component.utf8.count <= 241)
            }
        }
    }

    @Test func veryLongKeysWork() async throws {
        let provider = try DirectoryProvider(root: directory.file("root"))
        let keys = (0..<5).map { "\($0)" + String(repeating: "é", count: 600) }
        _ = try await provider.set(keys.map { KeyValue($0, $0.suffix(3) + "!") })
        #expect(try await provider.get(keys).map { try $0.get() } == keys.map { $0.suffix(3) + "!" })
        #expect(Set(try await provider.listKeys(after: nil, limit: 10).keys) == Set(keys))
        _ = try await provider.remove([keys[0]])
        #expect(try await provider.get([keys[0]])[0].get() == nil)
    }

    @Test func aRootThatIsAFileIsRefused() throws {
        let path = directory.file("file")
        try "x".write(toFile: path, atomically: true, encoding: .utf8)
        let error = #expect(throws: CloudSyncError.self) { try DirectoryProvider(id: "backup", root: path) }
        #expect(error?.code == .config)
        #expect(error?.provider == "backup")
        #expect(error?.message == "\(path) exists and is not a directory; choose another path")
    }

    @Test func aVanishedRootIsUnavailableAndListingSaysWhy() async throws {
        let root = directory.file("root")
        let provider = try DirectoryProvider(id: "backup", root: root)
        try FileManager.default.removeItem(atPath: root)
        #expect(await provider.isAvailable() == false)
        let error = await #expect(throws: CloudSyncError.self) { try await provider.listKeys(after: nil, limit: 10) }
        #expect(error?.message == "cannot read the directory \(root): No such file or directory")
        #expect(error?.provider == "backup")
    }

    @Test(.enabled(if: geteuid() != 0, "root reads every directory whatever its mode"))
    func anUnreadableRootGivesAClearError() async throws {
        let root = directory.file("root")
        let provider = try DirectoryProvider(root: root)
        chmod(root, 0)
        defer { chmod(root, 0o700) }
        #expect(await provider.isAvailable() == false)
        let error = await #expect(throws: CloudSyncError.self) { try await provider.listKeys(after: nil, limit: 10) }
        #expect(error?.message == "cannot read the directory \(root): Permission denied")
    }

    @Test func quotaComesFromTheFileSystem() async throws {
        let quota = try #require(try await DirectoryProvider(root: directory.file("root")).quota())
        #expect((quota.totalBytes ?? 0) > 0)
        #expect((quota.usedBytes ?? -1) >= 0)
        #expect(quota.usedBytes! <= quota.totalBytes!)
    }

    @Test func afterCloseItSaysClosedAndEveryCallFailsWithERR_CLOSED() async throws {
        let root = directory.file("closing")
        let provider = try DirectoryProvider(id: "backup", root: root)
        _ = try await provider.set([KeyValue("k", "v")])
        await provider.close()
        await provider.close()
        #expect(await provider.availability().reason == .closed)
        let errors = await ProviderConformanceSuite.errorsAfterClose(provider)
        #expect(errors.allSatisfy { $0?.code == .closed && $0?.provider == "backup" }, "\(errors)")
        // Nothing was written or removed after the close: the one file is the one written before it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: root) == ["k"])
        #expect(try String(contentsOfFile: root + "/k", encoding: .utf8) == "v")
        #expect(try await DirectoryProvider(root: root).get(["k"])[0].get() == "v")
    }
}

@Suite struct DirectoryBatchWriteTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    @Test func aBatchWithOneBlockedKeyWritesTheRestAndLeavesNoTemporaryFiles() async throws {
        let root = directory.file("root")
        let provider = try DirectoryProvider(id: "files", root: root)
        let long = String(repeating: "long", count: 100)
        _ = try await provider.set([KeyValue(long, "old")])
        let piece = try #require(try FileManager.default.contentsOfDirectory(atPath: root).first { $0.hasPrefix("+") })
        // The long key's subdirectory replaced by a plain file: its write cannot create its temporary file.
        try FileManager.default.removeItem(atPath: root + "/" + piece)
        try "in the way".write(toFile: root + "/" + piece, atomically: false, encoding: .utf8)
        let items = (0..<50).map { KeyValue("key.\($0)", "value \($0)") } + [KeyValue(long, "new")]
        let results = try await provider.set(items)
        #expect(results.prefix(50).allSatisfy { (try? $0.get()) != nil })
        let error = try #require(results[50].failure)
        #expect(error.code == .provider)
        #expect(error.key == long)
        #expect(error.provider == "files")
        #expect(
            try await provider.get(items.prefix(50).map(\.key)).map { try $0.get() } == (0..<50).map { "value \($0)" })
        let names = try FileManager.default.contentsOfDirectory(atPath: root)
        #expect(!names.contains { $0.hasPrefix(".") })
    }

    @Test func aKeyTwiceInOneBatchEndsWithTheLaterValue() async throws {
        let provider = try DirectoryProvider(root: directory.file("root"))
        let results = try await provider.set([KeyValue("k", "first"), KeyValue("other", "x"), KeyValue("k", "second")])
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(try await provider.get(["k"])[0].get() == "second")
    }

    @Test func aBatchRemoveDeletesEveryKeyAcrossDirectories() async throws {
        let provider = try DirectoryProvider(root: directory.file("root"))
        let keys = (0..<30).map { $0 % 2 == 0 ? "key.\($0)" : "long.\($0)." + String(repeating: "x", count: 300) }
        _ = try await provider.set(keys.map { KeyValue($0, "v") })
        let results = try await provider.remove(keys + ["never.written"])
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(try await provider.listKeys(after: nil, limit: 100).keys.isEmpty)
    }

    /// A writer rewriting 200 keys in batches of 100 is killed with SIGKILL at random moments; every key's file must
    /// then hold one whole value some generation wrote — never a torn or mixed file — at least as new as the last
    /// generation the writer confirmed, and listing must show exactly the 200 keys.
    @Test func aLargeBatchGetAnswersEachKeyInItsPlace() async throws {
        let root = directory.file("wide")
        let provider = try DirectoryProvider(root: root)
        let keys = (0..<1000).map { "key.\($0)" }
        // Every third key missing, one file that is not UTF-8; read many at once, each answer stays in its slot.
        _ = try await provider.set(
            keys.enumerated().filter { $0.offset % 3 != 0 }.map { KeyValue($0.element, "v\($0.offset)") })
        try Data([0xFF, 0xFE]).write(to: URL(fileURLWithPath: root + "/key.500"))
        #expect(DirectoryProvider.readWidth(forKeys: keys.count) > 2)
        let answers = try await provider.get(keys)
        #expect(answers.count == keys.count)
        for (index, answer) in answers.enumerated() {
            switch (index, answer) {
            case (500, .failure(let error)): #expect(error.code == .decode)
            case (_, .success(let value)): #expect(value == (index % 3 == 0 ? nil : "v\(index)"), "key \(index)")
            default: Issue.record("key \(index): \(answer)")
            }
        }
    }

    @Test func aKilledBatchWriterLeavesEachKeyOldOrNewNeverTorn() async throws {
        let writer = try ProcessRunner.builtProduct("cloudsync-test-fixture")
        var random = SystemRandomNumberGenerator()
        let keys = (0..<200).map { $0 % 3 == 0 ? "long.\($0)." + String(repeating: "k", count: 300) : "key.\($0)" }
        var confirmedTotal = 0
        for run in 0..<6 {
            let root = directory.file("crash-\(run)")
            let confirmed = try await killWriter(
                writer, root: root, afterGenerations: Int.random(in: 1...4, using: &random),
                extraMicroseconds: UInt32.random(in: 0...30_000, using: &random))
            confirmedTotal += confirmed
            let provider = try DirectoryProvider(root: root)
            let values = try await provider.get(keys)
            for (key, value) in zip(keys, values) {
                let text = try #require(try value.get(), "run \(run): \(key) has no file after generation \(confirmed)")
                let generation = GenerationValue.generation(of: text, key: key)
                #expect(generation != nil, "run \(run): \(key) holds a torn value: \(text.prefix(40))…")
                #expect((generation ?? 0) >= confirmed, "run \(run): \(key) went back to generation \(generation ?? 0)")
                #expect((generation ?? .max) <= confirmed + 1, "run \(run): \(key) is from an unwritten generation")
            }
            #expect(Set(try await provider.listKeys(after: nil, limit: 1000).keys) == Set(keys), "run \(run)")
        }
        #expect(confirmedTotal > 0)
    }

    /// Starts the writer, kills it after `afterGenerations` confirmed generations and a random moment.
    ///
    /// Returns the last generation it confirmed. Runs on its own thread: the reads block.
    private func killWriter(_ writer: String, root: String, afterGenerations: Int, extraMicroseconds: UInt32)
        async throws -> Int
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: writer)
                    process.arguments = ["directory-writer", root]
                    let output = Pipe()
                    process.standardOutput = output
                    process.standardError = FileHandle.nullDevice
                    try process.run()
                    var received = Data()
                    while received.filter({ $0 == UInt8(ascii: "\n") }).count < afterGenerations {
                        let chunk = output.fileHandleForReading.availableData
                        if chunk.isEmpty { break }
                        received += chunk
                    }
                    usleep(extraMicroseconds)
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                    received += output.fileHandleForReading.readDataToEndOfFile()
                    let lines = String(decoding: received, as: UTF8.self).split(separator: "\n")
                    let last = lines.last { $0.hasPrefix("generation ") }.flatMap { Int($0.dropFirst(11)) } ?? 0
                    continuation.resume(returning: last)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A full listing walks the tree once, and files added or removed between its pages never break its order or make a
/// key that stayed put go missing.
@Suite struct DirectoryListingTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func key(_ index: Int) -> String { String(format: "key.%05d", index) }

    @Test func filesAddedAndRemovedBetweenPagesKeepTheListingOrderedAndComplete() async throws {
        let provider = try DirectoryProvider(root: directory.file("changing"))
        // Even keys at first; odd ones are added while the listing runs, on both sides of its cursor.
        _ = try await provider.set((0..<1200).filter { $0 % 2 == 0 }.map { KeyValue(key($0), "v") })
        var listed: [String] = []
        var removed = Set<String>()
        var added = Set<String>()
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 100)
            listed += page.keys
            cursor = page.nextCursor
            pages += 1
            guard let cursor else { break }
            // Behind the cursor, ahead of it, and a key far ahead removed, each page.
            let position = Int(cursor.dropFirst(4))!
            let changes = [position - 5, position + 7, position + 301].filter { $0 % 2 == 1 && $0 < 1200 }
            _ = try await provider.set(changes.map { KeyValue(key($0), "new") })
            added.formUnion(changes.map(key))
            let gone = key(min(position + 200, 1198))
            _ = try await provider.remove([gone])
            removed.insert(gone)
        } while true
        #expect(pages > 5)
        #expect(
            zip(listed, listed.dropFirst()).allSatisfy { StoreKey.bytesPrecede($0, $1) }, "out of order or repeated")
        // Every key that was there throughout is listed; nothing is listed that never existed.
        let throughout = Set((0..<1200).filter { $0 % 2 == 0 }.map(key)).subtracting(removed)
        #expect(throughout.isSubset(of: Set(listed)))
        let ever = Set((0..<1200).filter { $0 % 2 == 0 }.map(key)).union(added)
        #expect(Set(listed).isSubset(of: ever))
        // A listing started afterwards sees exactly what is there now.
        let now = try await listEveryKey(of: provider, pageSize: 250)
        #expect(Set(now) == throughout.union(added))
        #expect(now.count == Set(now).count)
    }

    @Test func aPageAfterACursorNoListingHandedOutWalksAfresh() async throws {
        let provider = try DirectoryProvider(root: directory.file("resumed"))
        _ = try await provider.set((0..<50).map { KeyValue(key($0), "v") })
        _ = try await provider.listKeys(after: nil, limit: 10)
        // Written after that listing's walk, then asked for from a cursor it never handed out.
        _ = try await provider.set([KeyValue(key(25) + ".late", "v")])
        let page = try await provider.listKeys(after: key(24), limit: 3)
        #expect(page.keys == [key(25), key(25) + ".late", key(26)])
        #expect(page.nextCursor == key(26))
    }

    @Test func escapedAndNonASCIIKeysListInBytewiseOrderFromAnyCursor() async throws {
        let provider = try DirectoryProvider(root: directory.file("escaped"))
        // Escaped names (upper case, `%`, a leading dot, spaces), non-ASCII, two spellings of `é`, keys split into
        // directories, plain ones among them, and keys that are prefixes of others.
        let keys =
            SmallestKeysTests.keys + [
                ".dot", "..", "A.b", String(repeating: "é", count: 150), String(repeating: "x", count: 250),
            ]
            + (20..<60).map(key)
        _ = try await provider.set(keys.map { KeyValue($0, "v") })
        let sorted = keys.sorted(by: StoreKey.bytesPrecede)
        #expect(try await listEveryKey(of: provider, pageSize: 7) == sorted)
        // A page asked for from a cursor no listing handed out walks afresh and starts right after it.
        for (index, cursor) in sorted.enumerated() where index % 5 == 0 {
            let page = try await provider.listKeys(after: cursor, limit: 4)
            #expect(
                page.keys == Array(sorted[(index + 1)..<min(index + 5, sorted.count)]),
                "after \(cursor.debugDescription)")
        }
    }

    @Test func aListingOfManyPagesWalksTheTreeOnce() async throws {
        let root = directory.file("once")
        let provider = try DirectoryProvider(root: root)
        _ = try await provider.set((0..<300).map { KeyValue(key($0), "v") })
        let first = try await provider.listKeys(after: nil, limit: 100)
        // A file that appears only on disk, out of this listing's sight: later pages come from the first walk.
        try "v".write(toFile: root + "/" + key(250) + ".x", atomically: false, encoding: .utf8)
        let second = try await provider.listKeys(after: first.nextCursor, limit: 100)
        let third = try await provider.listKeys(after: second.nextCursor, limit: 100)
        #expect(first.keys + second.keys + third.keys == (0..<300).map(key))
        #expect(third.nextCursor == nil)
        // The listing is over: the next one walks again and sees the file.
        #expect(try await provider.listKeys(after: nil, limit: 1000).keys.count == 301)
    }
}
