import CloudSync
import CloudSyncTesting
import Foundation
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
        var listed: [String] = []
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 3)
            listed += page.keys
            cursor = page.nextCursor
        } while cursor != nil
        #expect(listed == keys.sorted(by: bytewiseLess))
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
        var listed: [String] = []
        var cursor: String?
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 4)
            listed += page.keys
            cursor = page.nextCursor
        } while cursor != nil
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
