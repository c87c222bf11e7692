import CloudSync
import CloudSyncDrive
import CloudSyncTesting
import Foundation
import Testing

/// Google's own client, google-api-python-client, as an app drives it against the emulator served over HTTPS: the
/// discovery document untouched, only `api_endpoint` pointing at the emulator, the CA file the emulator wrote trusted
/// (scripts/drive_client.py --ca).
@Suite(.timeLimit(.minutes(10))) struct DriveTLSInteropTests {
    @Test func googlesPythonClientWithApiEndpointWorksAgainstTheEmulatorOverTLS() async throws {
        guard FileManager.default.isExecutableFile(atPath: Repository.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let host = try DriveHost(tls: true)
        #expect(host.endpoint.scheme == "https")
        let caFile = try #require(host.caFile)
        let account = host.signIn()
        let swiftKey = "from-swift's key"
        // CloudSync's transport trusts only the system's authorities (see CloudSyncHTTP), so the file the script
        // reads is put in the emulator directly.
        host.files.addFile(user: account.user, name: swiftKey, content: Data("written by CloudSync ✓".utf8))
        host.clearLog()

        let result = try await ProcessRunner.run(
            Repository.python,
            [
                Repository.root + "/scripts/drive_client.py", "--ca", caFile, host.endpoint.absoluteString,
                account.accessToken, swiftKey,
            ])
        #expect(result.status == 0, "\(result.standardError)")
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        let origin = try #require(host.endpoint.absoluteString.split(separator: "/").last.map(String.init))
        // Left alone, the client sends a batch to the discovery document's rootUrl, not to api_endpoint.
        #expect(seen["defaultBatchUri"] as? String == "https://www.googleapis.com/batch/drive/v3")
        #expect(seen["created"] as? String == "py-note")
        #expect(seen["listed"] as? Bool == true)
        #expect(seen["downloaded"] as? String == "hello from python")
        #expect(seen["updated"] as? String == "changed by python")
        #expect(seen["resumableSession"] as? String == "https://\(origin)")
        #expect(seen["resumableChunks"] as? Int == 12)
        #expect(seen["resumableIntact"] as? Bool == true)
        #expect(seen["swiftValue"] as? String == "written by CloudSync ✓")
        #expect(seen["changes"] as? Int == 3)
        // list_next pages, a ranged download and the other steps of fidelity_steps, as over plain HTTP.
        #expect(seen["pagedNames"] as? [String] == (0..<5).map { "page-\($0)" })
        #expect(seen["pages"] as? Int == 3)
        #expect(seen["rangedChunks"] as? Int == 5)
        #expect(seen["rangedIntact"] as? Bool == true)
        #expect(seen["md5Matches"] as? Bool == true)
        #expect(seen["generatedUsed"] as? Bool == true)
        #expect(seen["queried"] as? [String] == ["generated", "page-1"])
        #expect(seen["batchDeleted"] as? Int == 4)
        #expect(seen["remaining"] as? [String] == ["from-python", swiftKey, "py-note"].sorted())
        // Every request reached the emulator, in the protocols asked for.
        #expect(host.log.contains { $0.queryItems.contains { $0.name == "uploadType" && $0.value == "multipart" } })
        #expect(host.log.filter { $0.method == "PUT" && $0.path == "/upload/drive/v3/files" }.count == 12)
        #expect(host.count("POST", "/batch/drive/v3") == 1)
        #expect(host.count("GET", "/drive/v3/files", query: "pageToken") == 2)
        let written = host.files.files(of: account.user).first { $0.name == "from-python" }
        #expect(written.map { String(decoding: $0.content, as: UTF8.self) } == "written by Google's client ✓")
    }
}
