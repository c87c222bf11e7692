import CloudSync
import CloudSyncDrive
import CloudSyncTesting
import Foundation
import Testing

/// Files under keys on Drive, against the emulator: the app data folder's files hold the bytes, sent resumably from
/// the file above the threshold and downloaded into one.
@Suite(.timeLimit(.minutes(10))) struct DriveFileTests {
    @Test func drivePassesTheFileChecks() async throws {
        let host = try DriveHost()
        let failures = await ProviderConformanceSuite.runFiles { host.provider() }
        #expect(failures == [])
    }

    @Test func aLargeFileGoesUpInChunksReadFromTheFileAndComesBackWhole() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken)
        // No store deadline: the chunk and request counts are the subject, and a loaded machine has held the
        // availability probe past 15 s.
        var options = StoreOptions()
        options.timeout = nil
        let store = try CloudStore(providers: [provider], options: options)
        let scratch = try TemporaryDirectory(prefix: "drive-files")
        let size = DriveProvider.resumableThreshold + 3 * provider.chunkSize / 2
        let data = ProviderConformanceSuite.fileBytes(count: size, start: 3)
        try data.write(to: URL(fileURLWithPath: scratch.file("big")))
        host.clearLog()

        #expect(try await store.putFile("big.bin", from: scratch.file("big")).size == Int64(size))
        let chunks = host.log.filter { $0.method == "PUT" && $0.path == "/upload/drive/v3/files" }
        let expected = (size + provider.chunkSize - 1) / provider.chunkSize
        #expect(chunks.count == expected)
        #expect(chunks.allSatisfy { $0.bodySize <= provider.chunkSize })

        // Another provider of the same account (nothing cached) finds and downloads it.
        let fresh = host.provider(refreshToken: account.refreshToken)
        #expect(try await fresh.fileSize("big.bin") == Int64(size))
        let destination = scratch.file("back")
        _ = FileManager.default.createFile(atPath: destination, contents: nil)
        #expect(try await fresh.getFile("big.bin", to: destination, size: Int64(size)))
        #expect(FileManager.default.contents(atPath: destination) == data)
    }
}
