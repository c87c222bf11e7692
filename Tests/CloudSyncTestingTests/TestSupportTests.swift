import CloudSyncTesting
import Foundation
import Testing

@Suite struct TestSupportTests {
    @Test func temporaryDirectoryIsPrivateAndRemovedWithItsContents() throws {
        var directory: TemporaryDirectory? = try TemporaryDirectory()
        let path = try #require(directory?.path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        try FileManager.default.createDirectory(atPath: "\(path)/nested", withIntermediateDirectories: true)
        try "x".write(toFile: "\(path)/nested/file", atomically: true, encoding: .utf8)
        directory = nil
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func processRunnerCapturesBothStreamsAndTheStatus() async throws {
        // Enough output on stderr to fill a pipe buffer, which would deadlock a runner that read only stdout.
        let result = try await ProcessRunner.run(
            "/bin/sh", ["-c", "echo out; head -c 200000 /dev/zero | tr '\\\\0' e >&2; exit 3"])
        #expect(result.status == 3)
        #expect(result.standardOutput == "out\n")
        #expect(result.standardError.utf8.count == 200_000)
    }
}
