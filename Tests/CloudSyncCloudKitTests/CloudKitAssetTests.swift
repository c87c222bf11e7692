import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// Files in Asset fields through the bridge, against the CloudKit emulator over loopback.
@Suite struct CloudKitAssetTests {
    /// `count` bytes of a repeating but not constant pattern, written to `path`.
    static func writeFile(_ path: String, count: Int) throws -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        var state: UInt32 = 2_463_534_242
        for index in bytes.indices {
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            bytes[index] = UInt8(truncatingIfNeeded: state)
        }
        let data = Data(bytes)
        try data.write(to: URL(fileURLWithPath: path))
        return data
    }

    /// A record of type `Document` whose Asset field `file` holds `asset`.
    static func document(_ name: String, _ asset: CloudKitAsset) -> CloudKitRecord {
        CloudKitRecord(
            recordName: name, recordType: "Document", fields: ["file": .asset(asset), "title": .string(name)])
    }

    /// A record saved with its field holding the file `path` uploaded for it.
    static func saveDocument(_ bridge: CloudKitBridge, _ name: String, file path: String) async throws -> CloudKitAsset
    {
        let asset = try await bridge.uploadAsset(
            fileAt: path, recordName: name, recordType: "Document", fieldName: "file")
        let saved = try await bridge.modify([CloudKitOperation(.forceReplace, document(name, asset))])
        _ = try #require(try saved.first?.get())
        return asset
    }

    @Test func aThreeMegabyteFileRoundTripsByteForByte() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let directory = try TemporaryDirectory()
        let original = try Self.writeFile(directory.file("in.bin"), count: 3 * 1024 * 1024)

        let uploaded = try await Self.saveDocument(bridge, "doc.1", file: directory.file("in.bin"))
        #expect(uploaded.size == Int64(original.count))
        #expect(uploaded.receipt != nil && uploaded.fileChecksum != nil)
        #expect(uploaded.wrappingKey != nil && uploaded.referenceChecksum != nil)

        let record = try #require(try await bridge.lookup(["doc.1"]).first?.get())
        let held = try #require(record.fields["file"]?.assetValue)
        #expect(held.size == Int64(original.count))
        #expect(held.fileChecksum == uploaded.fileChecksum)
        #expect(held.receipt == nil)
        #expect(held.downloadURL?.host == "127.0.0.1")
        #expect(record.fields["title"] == .string("doc.1"))

        let found = try await bridge.downloadAsset(
            recordName: "doc.1", fieldName: "file", to: directory.file("out.bin"))
        #expect(found?.fileChecksum == uploaded.fileChecksum)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("out.bin"))) == original)
        #expect(try await bridge.downloadAsset(recordName: "absent", fieldName: "file", to: directory.file("x")) == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.file("x")))

        // The change feed carries the asset too.
        let changes = try await bridge.fetchChanges(since: nil)
        #expect(changes.records.first?.fields["file"]?.assetValue?.fileChecksum == uploaded.fileChecksum)
        // No CloudKit token went to the upload or download URLs.
        for entry in fixture.host.server.requestLog where entry.path.hasPrefix("/ckassets/") {
            #expect(!entry.target.contains("ckWebAuthToken") && !entry.target.contains("ckAPIToken"))
        }
    }

    @Test func aFileOver50MegabytesIsRefusedBeforeAnythingIsSent() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let directory = try TemporaryDirectory()
        let path = directory.file("big.bin")
        // Sparse: its size without 50 MB of writes.
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: UInt64(CloudKitBridge.maxAssetBytes) + 1)
        try handle.close()
        fixture.host.server.clearLog()

        let error = await #expect(throws: CloudKitError.self) {
            try await bridge.uploadAsset(fileAt: path, recordName: "big", recordType: "Document", fieldName: "file")
        }
        #expect(error?.code == .badInput)
        #expect(error?.underlying?.code == .payloadTooLarge)
        #expect(error?.message.contains("50 MB") == true)
        #expect(error?.message.contains(path) == true)
        #expect(fixture.host.server.requestLog.isEmpty)
    }

    @Test func anUploadURLIsGoodOnceFor15MinutesOfTheEmulatorsClock() async throws {
        let clock = ManualClock()
        let fixture = try CloudKitFixture(clock: clock)
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let directory = try TemporaryDirectory()
        _ = try Self.writeFile(directory.file("in.bin"), count: 1000)

        let late = try await bridge.assetUploadURL(recordName: "doc", recordType: "Document", fieldName: "file")
        #expect(late.host == "127.0.0.1" && late.port == Int(fixture.host.server.port))
        clock.advance(by: .seconds(15 * 60 + 1))
        let expired = await #expect(throws: CloudKitError.self) {
            try await bridge.uploadAsset(fileAt: directory.file("in.bin"), to: late)
        }
        #expect(expired?.code == .badInput)
        #expect(expired?.serverErrorCode == "NOT_FOUND")
        #expect(expired?.httpStatus == 404)
        #expect(expired?.reason?.contains("expired") == true)

        let fresh = try await bridge.assetUploadURL(recordName: "doc", recordType: "Document", fieldName: "file")
        clock.advance(by: .seconds(15 * 60 - 1))
        let asset = try await bridge.uploadAsset(fileAt: directory.file("in.bin"), to: fresh)
        #expect(asset.size == 1000)
        let again = await #expect(throws: CloudKitError.self) {
            try await bridge.uploadAsset(fileAt: directory.file("in.bin"), to: fresh)
        }
        #expect(again?.serverErrorCode == "NOT_FOUND")
    }

    @Test func aForgedOrMisdirectedReceiptIsThatRecordsBadRequest() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let directory = try TemporaryDirectory()
        _ = try Self.writeFile(directory.file("in.bin"), count: 4096)
        let asset = try await bridge.uploadAsset(
            fileAt: directory.file("in.bin"), recordName: "mine", recordType: "Document", fieldName: "file")
        var forged = asset
        forged.receipt = "forged-receipt"
        let results = try await bridge.modify([
            CloudKitOperation(.forceReplace, Self.document("mine", forged)),
            // The real receipt, but for another record.
            CloudKitOperation(.forceReplace, Self.document("other", asset)),
            CloudKitOperation(.forceReplace, item("plain", "still saved")),
        ])
        for result in results.prefix(2) {
            let error = #expect(throws: CloudKitError.self) { try result.get() }
            #expect(error?.code == .badInput)
            #expect(error?.serverErrorCode == "BAD_REQUEST")
            #expect(error?.reason?.contains("receipt") == true)
        }
        #expect(try results[2].get()?.recordName == "plain")
        // The genuine one still claims the upload; the same save again (a retry) changes nothing.
        let save = CloudKitOperation(.forceReplace, Self.document("mine", asset))
        _ = try #require(try await bridge.modify([save])[0].get())
        _ = try #require(try await bridge.modify([save])[0].get())
        #expect(fixture.emulator.database.storedAssets.count == 1)
        // Once the field holds something else, the spent receipt claims nothing.
        _ = try await bridge.modify([CloudKitOperation(.forceReplace, item("mine", "no file now"))])
        let reused = try await bridge.modify([save])
        let spent = #expect(throws: CloudKitError.self) { try reused[0].get() }
        #expect(spent?.reason?.contains("used already") == true)
    }

    /// A download (a `GET`) is sent again after a 503; an upload (a `POST` to a single-use URL) is not.
    @Test func aDownloadIsRetriedAndAnUploadIsNot() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge(maxAttempts: 3)
        try await bridge.ensureZone()
        let directory = try TemporaryDirectory()
        let original = try Self.writeFile(directory.file("in.bin"), count: 100_000)
        _ = try await Self.saveDocument(bridge, "doc", file: directory.file("in.bin"))

        fixture.host.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: [1], route: "GET /ckassets/download/{id}")]))
        _ = try await bridge.downloadAsset(recordName: "doc", fieldName: "file", to: directory.file("out.bin"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("out.bin"))) == original)
        #expect(fixture.host.server.requestLog.filter { $0.path.hasPrefix("/ckassets/download/") }.count == 2)

        fixture.host.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: [1], route: "POST /ckassets/upload/{id}")]))
        fixture.host.server.clearLog()
        let error = await #expect(throws: CloudKitError.self) {
            try await bridge.uploadAsset(
                fileAt: directory.file("in.bin"), recordName: "doc", recordType: "Document", fieldName: "file")
        }
        #expect(error?.code == .retryLater)
        #expect(fixture.host.server.requestLog.filter { $0.path.hasPrefix("/ckassets/upload/") }.count == 1)
    }

    @Test func deletingOrReplacingTheRecordFreesTheAsset() async throws {
        let directory = try TemporaryDirectory()
        let data = directory.file("data")
        let fixture = try CloudKitFixture(dataDirectory: data)
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        _ = try Self.writeFile(directory.file("a.bin"), count: 10_000)
        _ = try Self.writeFile(directory.file("b.bin"), count: 20_000)
        let stored = { try FileManager.default.contentsOfDirectory(atPath: data + "/cloudkit-assets").count }

        _ = try await Self.saveDocument(bridge, "doc", file: directory.file("a.bin"))
        #expect(fixture.emulator.database.storedAssets.count == 1)
        #expect(fixture.emulator.database.storedAssets.bytes == 10_000)
        #expect(try stored() == 1)
        let first = try #require(try await bridge.lookup(["doc"])[0].get()?.fields["file"]?.assetValue)

        // Saving the record back as read (the asset without a receipt) keeps it.
        var record = try #require(try await bridge.lookup(["doc"])[0].get())
        record.fields["title"] = .string("renamed")
        _ = try #require(try await bridge.modify([CloudKitOperation(.forceReplace, record)])[0].get())
        #expect(fixture.emulator.database.storedAssets.count == 1)
        try await bridge.downloadAsset(first, to: directory.file("kept.bin"))

        // Replacing the field frees the first file.
        _ = try await Self.saveDocument(bridge, "doc", file: directory.file("b.bin"))
        #expect(fixture.emulator.database.storedAssets.bytes == 20_000)
        #expect(try stored() == 1)
        let freed = await #expect(throws: CloudKitError.self) {
            try await bridge.downloadAsset(first, to: directory.file("gone.bin"))
        }
        #expect(freed?.httpStatus == 404)

        // Deleting the record frees the second.
        #expect(try await bridge.deleteRecords(["doc"]).allSatisfy { (try? $0.get()) != nil })
        #expect(fixture.emulator.database.storedAssets.count == 0)
        #expect(try stored() == 0)

        // So does deleting the zone.
        _ = try await Self.saveDocument(bridge, "doc", file: directory.file("a.bin"))
        #expect(try stored() == 1)
        try await bridge.deleteZone()
        #expect(fixture.emulator.database.storedAssets.count == 0)
        #expect(try stored() == 0)
    }
}
