import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Files planted in a directory provider's root are never followed, served or written through.
///
/// On the real file system: symbolic links to files and directories outside it, a link to `/dev/zero`, a FIFO.
@Suite struct DirectoryLinkTests {
    let directory: TemporaryDirectory
    let root: String
    let outside: String

    init() throws {
        directory = try TemporaryDirectory()
        root = directory.file("root")
        outside = directory.file("outside")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try "the secret\n".write(toFile: outside + "/secret.txt", atomically: true, encoding: .utf8)
    }

    private func provider() throws -> DirectoryProvider { try DirectoryProvider(id: "dir", root: root) }

    private func failure(_ result: Result<String?, CloudSyncError>) -> CloudSyncError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    @Test func aLinkUnderAKeysNameIsRefusedNotServed() async throws {
        #expect(symlink("../outside/secret.txt", root + "/leak") == 0)
        let result = try await provider().get(["leak"])[0]
        let error = try #require(failure(result), "the link was followed: \(result)")
        #expect(error.code == .provider)
        #expect(error.message.contains("\(root)/leak is not a file this provider made"))
        #expect(!error.message.contains("the secret"))
    }

    @Test func aLinkToDevZeroOrAFIFOIsRefusedAtOnce() async throws {
        #expect(symlink("/dev/zero", root + "/zero") == 0)
        #expect(mkfifo(root + "/pipe", 0o600) == 0)
        let results = try await provider().get(["zero", "pipe"])
        #expect(failure(results[0])?.code == .provider)
        #expect(failure(results[1])?.message.contains("\(root)/pipe is not a file this provider made") == true)
    }

    @Test func aWriteReplacesALinkUnderItsNameAndLeavesItsTargetAlone() async throws {
        #expect(symlink("../outside/secret.txt", root + "/leak") == 0)
        let written = try await provider().set([KeyValue("leak", "mine")])
        #expect((try? written[0].get()) != nil)
        var info = stat()
        #expect(lstat(root + "/leak", &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
        #expect(try String(contentsOfFile: outside + "/secret.txt", encoding: .utf8) == "the secret\n")
        #expect(try await provider().get(["leak"]).map { try $0.get() } == ["mine"])
    }

    /// A 300-byte key's file lives in a `+…` directory of the first 200 bytes: a link planted there to a directory
    /// outside made the write create its file outside the root.
    @Test func aLinkWhereAKeysDirectoryGoesIsNeverWrittenThrough() async throws {
        let key = String(repeating: "l", count: 300)
        #expect(symlink(outside, root + "/+" + String(repeating: "l", count: 200)) == 0)
        let dir = try provider()
        let written = try await dir.set([KeyValue(key, "escaped?")])
        guard case .failure(let error) = written[0] else {
            Issue.record("the write went through the link")
            return
        }
        #expect(error.message.contains("is not a directory this provider made"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["secret.txt"])
        #expect(failure(try await dir.get([key])[0]) != nil)
        let removed = try await dir.remove([key])
        #expect((try? removed[0].get()) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["secret.txt"])
    }

    @Test func aKeyTooLongForTheFileSystemIsRefusedBeforeAnyFile() async throws {
        let store = try CloudStore(providers: [try provider()])
        let key = String(repeating: "\u{E9}", count: 600)
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: key) }
        #expect(error?.code == .invalidKey)
        #expect(error?.message.contains("\(DirectoryProvider.maxKeyBytes) bytes") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).isEmpty)
    }

    /// A value larger than the provider takes (a file someone else put there) is refused, not read whole.
    @Test func aFileLargerThanTheProviderTakesIsRefused() async throws {
        try String(repeating: "x", count: 4096).write(toFile: root + "/big", atomically: true, encoding: .utf8)
        let capped = try DirectoryProvider(id: "dir", root: root, maxValueBytes: 1000)
        #expect(failure(try await capped.get(["big"])[0])?.code == .payloadTooLarge)
    }
}
