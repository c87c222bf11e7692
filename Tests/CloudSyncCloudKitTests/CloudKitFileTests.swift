import CloudSync
import CloudSyncCloudKit
import CloudSyncTesting
import Foundation
import Testing

/// Files under keys on CloudKit, against the emulator: the key's record holds the file as an asset.
@Suite(.timeLimit(.minutes(10))) struct CloudKitFileTests {
    /// A store over `provider` without a deadline: what lands is the subject, and a loaded machine has held the
    /// availability probe past the default 15 s.
    func unboundedStore(_ provider: CloudKitProvider) throws -> CloudStore {
        var options = StoreOptions()
        options.timeout = nil
        return try CloudStore(providers: [provider], options: options)
    }

    @Test func cloudKitPassesTheFileChecks() async throws {
        let fixture = try CloudKitFixture()
        let counter = Counter()
        let failures = await ProviderConformanceSuite.runFiles {
            try fixture.provider(zone: "Files\(counter.next())")
        }
        #expect(failures == [])
    }

    @Test func aFileIsAnAssetOfTheKeysRecordAndAValueReadsAsAFile() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        let store = try unboundedStore(provider)
        let scratch = try TemporaryDirectory(prefix: "ck-files")
        let data = ProviderConformanceSuite.fileBytes(count: 2_000_000, start: 9)
        try data.write(to: URL(fileURLWithPath: scratch.file("in")))
        #expect(try await store.putFile("photo.jpg", from: scratch.file("in")).providers == ["ck"])

        let record = try #require(try await provider.bridge.lookup(["photo.jpg"]).first?.get())
        #expect(record.fields[provider.fileField]?.assetValue?.size == Int64(data.count))
        #expect(record.fields[provider.field] == nil)
        let asValue = await #expect(throws: CloudSyncError.self) { _ = try await store.get("photo.jpg") }
        #expect(asValue?.code == .decode)
        #expect(asValue?.message.contains("getFile") == true)
        #expect(try await store.getFile("photo.jpg", to: scratch.file("out"))?.size == Int64(data.count))
        #expect(FileManager.default.contents(atPath: scratch.file("out")) == data)

        // A value is bytes under a key too.
        try await store.set("plain text ✓", forKey: "note")
        #expect(try await provider.fileSize("note") == Int64("plain text ✓".utf8.count))
        #expect(try await store.getFile("note", to: scratch.file("note"))?.size == 14)
        #expect(FileManager.default.contents(atPath: scratch.file("note")) == Data("plain text ✓".utf8))
    }

    @Test func aFileOverFiftyMegabytesIsRefusedBeforeAnyRequest() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        let store = try unboundedStore(provider)
        let scratch = try TemporaryDirectory(prefix: "ck-files")
        let path = scratch.file("sparse")
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        #expect(truncate(path, off_t(CloudKitBridge.maxAssetBytes + 1)) == 0)
        fixture.host.server.clearLog()
        let refused = await #expect(throws: CloudSyncError.self) { try await store.putFile("big", from: path) }
        #expect(refused?.code == .payloadTooLarge)
        #expect(refused?.message.contains("52428800") == true)
        #expect(fixture.host.server.requestLog.filter { $0.path.contains("assets") }.isEmpty)
        let direct = await #expect(throws: CloudSyncError.self) {
            try await provider.putFile("big", from: path, size: CloudKitBridge.maxAssetBytes + 1)
        }
        #expect(direct?.code == .payloadTooLarge)
    }
}
