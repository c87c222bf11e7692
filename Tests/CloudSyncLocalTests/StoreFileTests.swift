import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The store's file API (`putFile`/`getFile`) over directory providers: files bypass tiering and codecs, stream
/// through, land whole, and never replace what is not a regular file.
@Suite struct StoreFileTests {
    let scratch: TemporaryDirectory

    init() throws { scratch = try TemporaryDirectory(prefix: "store-files") }

    func directory(_ id: String = "directory") throws -> DirectoryProvider {
        try DirectoryProvider(id: id, root: scratch.file("roots/\(id)-\(UUID().uuidString)"))
    }

    func source(_ data: Data, _ name: String = "source.bin") throws -> String {
        let path = scratch.file(name)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        stat(path, &info)
        return info.st_mode
    }

    func error(_ body: () async throws -> Void) async -> CloudSyncError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? CloudSyncError
        }
    }

    @Test func theDirectoryProviderPassesTheFileChecks() async throws {
        let scratch = self.scratch
        let failures = await ProviderConformanceSuite.runFiles {
            try DirectoryProvider(root: scratch.file("conformance-\(UUID().uuidString)"))
        }
        #expect(failures == [])
    }

    @Test func aFileRoundTripsWholeAndLeavesNothingBesideIt() async throws {
        let provider = try directory()
        let store = try CloudStore(providers: [provider])
        let data = ProviderConformanceSuite.fileBytes(count: 5 * (1 << 20) + 3)
        let put = try await store.putFile("photos/2026/cat.jpg", from: try source(data))
        #expect(put == FileReceipt(key: "photos/2026/cat.jpg", size: Int64(data.count), providers: ["directory"]))

        try FileManager.default.createDirectory(atPath: scratch.file("out"), withIntermediateDirectories: true)
        let destination = scratch.file("out/cat.jpg")
        let got = try await store.getFile("photos/2026/cat.jpg", to: destination)
        #expect(got == FileReceipt(key: "photos/2026/cat.jpg", size: Int64(data.count), providers: ["directory"]))
        #expect(contents(destination) == data)
        #expect(mode(destination) & 0o777 == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.file("out")) == ["cat.jpg"])

        // The file is a key like any other: listed, and gone with remove.
        #expect(try await store.allKeys().keys == ["photos/2026/cat.jpg"])
        try await store.remove("photos/2026/cat.jpg")
        #expect(try await store.getFile("photos/2026/cat.jpg", to: scratch.file("out/again")) == nil)
        #expect(!FileManager.default.fileExists(atPath: scratch.file("out/again")))
    }

    @Test func aTextFileReadsAsAValueAndABinaryOneIsADecodeError() async throws {
        let provider = try directory()
        let store = try CloudStore(providers: [provider])
        try await store.putFile("note", from: try source(Data("plain text ✓".utf8), "note.txt"))
        #expect(try await store.get("note") == "plain text ✓")
        try await store.putFile("blob", from: try source(Data([0xff, 0xfe, 0x00])))
        #expect(await error { _ = try await store.get("blob") }?.code == .decode)
        #expect(try await store.getFile("blob", to: scratch.file("blob.out"))?.size == 3)
    }

    @Test func aReplacedFileKeepsItsModeAndALinkStaysALink() async throws {
        let store = try CloudStore(providers: [try directory()])
        try await store.putFile("k", from: try source(Data("new bytes".utf8)))

        let existing = scratch.file("private.txt")
        try Data("old".utf8).write(to: URL(fileURLWithPath: existing))
        chmod(existing, 0o600)
        _ = try await store.getFile("k", to: existing)
        #expect(contents(existing) == Data("new bytes".utf8))
        #expect(mode(existing) & 0o777 == 0o600)

        let target = scratch.file("target.txt")
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        let link = scratch.file("link.txt")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        _ = try await store.getFile("k", to: link)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == target)
        #expect(contents(target) == Data("new bytes".utf8))
    }

    @Test func getFileRefusesToReplaceWhatIsNotARegularFile() async throws {
        let store = try CloudStore(providers: [try directory()])
        try await store.putFile("k", from: try source(Data("bytes".utf8)))
        let fifo = scratch.file("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        let toDevice = scratch.file("to-dev-null")
        // A link to the device, never the device itself: a test that got this wrong would replace it machine-wide.
        try FileManager.default.createSymbolicLink(atPath: toDevice, withDestinationPath: "/dev/null")
        for path in [scratch.path, fifo, toDevice, scratch.file("no-such-dir/file")] {
            let refused = await error { _ = try await store.getFile("k", to: path) }
            #expect(refused?.code == .config, "\(path)")
            #expect(refused?.message.contains(path) == true, "\(String(describing: refused))")
        }
        #expect(mode(fifo) & S_IFMT == S_IFIFO)
        #expect(mode("/dev/null") & S_IFMT == S_IFCHR)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: toDevice) == "/dev/null")
    }

    @Test func aMissingKeyLeavesTheDestinationAsItWas() async throws {
        let store = try CloudStore(providers: [try directory()])
        let destination = scratch.file("kept.txt")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: destination))
        #expect(try await store.getFile("absent", to: destination) == nil)
        #expect(contents(destination) == Data("mine".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted() == ["kept.txt", "roots"])
    }

    @Test func putFileRefusesASourceThatIsNotAFile() async throws {
        let store = try CloudStore(providers: [try directory()])
        let fifo = scratch.file("source-pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in [scratch.file("missing.bin"), scratch.path, fifo] {
            let refused = await error { try await store.putFile("k", from: path) }
            #expect(refused?.code == .config, "\(path)")
            #expect(refused?.message.contains(path) == true, "\(String(describing: refused))")
        }
        #expect(try await store.allKeys().keys.isEmpty)
    }

    @Test func filesGoOnlyToProvidersThatStoreThemAsTheyAre() async throws {
        let file = try source(Data("x".utf8))
        let valuesOnly = try CloudStore(providers: [MemoryProvider(id: "memory")])
        let none = await error { try await valuesOnly.putFile("k", from: file) }
        #expect(none?.code == .unsupported)
        #expect(none?.message.contains("memory") == true)

        var options = StoreOptions()
        options.codec = BracketingCodec()
        let encoded = try CloudStore(providers: [try directory()], options: options)
        let refused = await error { try await encoded.putFile("k", from: file) }
        #expect(refused?.code == .unsupported)
        #expect(refused?.message.contains("codec") == true)

        let memory = MemoryProvider(id: "memory")
        let mixed = try CloudStore(providers: [memory, try directory()])
        #expect(try await mixed.putFile("k", from: file).providers == ["directory"])
        #expect(try await memory.get(["k"]).first.map { try $0.get() } == .some(nil))
    }

    @Test func aFileLargerThanAProviderTakesRoutesPastItOrIsRefusedNamingTheLimit() async throws {
        let file = try source(ProviderConformanceSuite.fileBytes(count: 100))
        let small = SwitchableFiles(try directory("small"), maxFileBytes: 10)
        let large = try directory("large")
        let store = try CloudStore(providers: [small, large])
        let receipt = try await store.putFile("k", from: file)
        #expect(receipt.providers == ["large"])
        #expect(receipt.skippedTooLarge == ["small"])

        let alone = try CloudStore(providers: [SwitchableFiles(try directory("only"), maxFileBytes: 10)])
        let refused = await error { try await alone.putFile("k", from: file) }
        #expect(refused?.code == .payloadTooLarge)
        #expect(refused?.message.contains("100 bytes") == true)
        #expect(refused?.message.contains("only takes 10") == true)
    }

    @Test func failoverPassesOverAnUnavailableProviderAndSaysItMayHoldAnOlderFile() async throws {
        let first = SwitchableFiles(try directory("first"))
        let second = try directory("second")
        var options = StoreOptions()
        options.availabilityLifetime = .zero
        let store = try CloudStore(providers: [first, second], options: options)
        try await store.putFile("k", from: try source(Data("old".utf8), "old"))
        first.isUp = false
        let receipt = try await store.putFile("k", from: try source(Data("new".utf8), "new"))
        #expect(receipt.providers == ["second"])
        #expect(receipt.mayHoldOlder == ["first"])
        // While first is away, the read falls through to the new file.
        let got = try await store.getFile("k", to: scratch.file("out"))
        #expect(got?.providers == ["second"])
        #expect(contents(scratch.file("out")) == Data("new".utf8))
    }

    @Test func aMirroredPutLandsOnEveryAvailableFileProvider() async throws {
        let first = try directory("first")
        let second = try directory("second")
        var options = StoreOptions()
        options.writeMode = .mirror
        let store = try CloudStore(providers: [first, second], options: options)
        let data = ProviderConformanceSuite.fileBytes(count: 4096)
        #expect(try await store.putFile("k", from: try source(data)).providers == ["first", "second"])
        for provider in [first, second] {
            let out = scratch.file("out-\(provider.id)")
            _ = FileManager.default.createFile(atPath: out, contents: nil)
            #expect(try await provider.getFile("k", to: out, size: 4096))
            #expect(contents(out) == data)
        }
    }
}

extension StoreFileTests {
    /// A write of the key that outlived its deadline and still runs is waited for (a second deadline), then the file
    /// is not sent to that provider: put then, it could be overwritten when the late write lands (putFile ignored
    /// what the lock told it and sent the file).
    @Test func aLateWriteStillRunningIsNotOvertakenByAFile() async throws {
        let clock = ManualClock()
        let held = HeldWrites(try directory())
        var options = StoreOptions()
        options.clock = clock
        options.timeout = .seconds(5)
        let store = try CloudStore(providers: [held], options: options)
        let late = Task { try await store.set("old value", forKey: "k") }
        try await waitUntil { held.waiting == 1 && clock.sleeperCount == 1 }
        clock.advance(by: .seconds(5))
        let lateError = await error { _ = try await late.value }
        #expect(lateError?.code == .timeout)

        let file = try source(Data("the file".utf8))
        let put = Task { try await store.putFile("k", from: file) }
        // The put waits for the late write up to a second deadline, which passes with the write still running.
        try await waitUntil { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(5))
        let putError = await error { _ = try await put.value }
        #expect(putError?.code == .timeout)
        #expect(putError?.message.contains("the file was not sent") == true, "\(String(describing: putError))")
        #expect(held.filesPut == 0)
        held.letGo()
        try await waitUntil { held.waiting == 0 }
        // Once the late write has returned, a put goes through.
        #expect(try await store.putFile("k", from: file).providers == [held.id])
        #expect(held.filesPut == 1)
    }
}

/// A directory provider whose value writes wait until the test lets them go, however long the caller waited: a late
/// write still running after its deadline.
private final class HeldWrites: FileStoringProvider, @unchecked Sendable {
    private let inner: DirectoryProvider
    private let state = Protected<(waiting: [CheckedContinuation<Void, Never>], open: Bool, filesPut: Int)>(
        ([], false, 0))

    init(_ inner: DirectoryProvider) { self.inner = inner }

    var waiting: Int { state.withLock { $0.waiting.count } }
    var filesPut: Int { state.withLock { $0.filesPut } }

    func letGo() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    var id: String { inner.id }
    var capabilities: ProviderCapabilities { inner.capabilities }
    var maxFileBytes: Int64? { nil }
    func availability() async -> Availability { .available }
    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await inner.get(keys) }
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                if !state.open { state.waiting.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
        return try await inner.set(items)
    }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { try await inner.remove(keys) }
    func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await inner.listKeys(after: cursor, limit: limit)
    }
    func putFile(_ key: String, from source: String, size: Int64) async throws {
        state.withLock { $0.filesPut += 1 }
        try await inner.putFile(key, from: source, size: size)
    }
    func fileSize(_ key: String) async throws -> Int64? { try await inner.fileSize(key) }
    func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try await inner.getFile(key, to: destination, size: size)
    }
}

/// A codec that brackets values, so a store has one.
private struct BracketingCodec: ValueCodec {
    func encode(_ value: String, key: String) throws -> String { "[\(value)]" }
    func decode(_ stored: String, key: String) throws -> String { String(stored.dropFirst().dropLast()) }
}

/// A directory provider that can be switched off and given a file size limit.
private final class SwitchableFiles: FileStoringProvider, @unchecked Sendable {
    let inner: DirectoryProvider
    let maxFileBytes: Int64?
    private let up = Protected(true)
    var isUp: Bool {
        get { up.withLock { $0 } }
        set { up.withLock { $0 = newValue } }
    }

    init(_ inner: DirectoryProvider, maxFileBytes: Int64? = nil) {
        self.inner = inner
        self.maxFileBytes = maxFileBytes
    }

    var id: String { inner.id }
    var capabilities: ProviderCapabilities { inner.capabilities }
    func availability() async -> Availability {
        isUp ? .available : .unavailable(.offline, "switched off by the test")
    }
    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await inner.get(keys) }
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { try await inner.set(items) }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { try await inner.remove(keys) }
    func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await inner.listKeys(after: cursor, limit: limit)
    }
    func putFile(_ key: String, from source: String, size: Int64) async throws {
        try await inner.putFile(key, from: source, size: size)
    }
    func fileSize(_ key: String) async throws -> Int64? { try await inner.fileSize(key) }
    func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try await inner.getFile(key, to: destination, size: size)
    }
}
