import CloudSync
import CloudSyncDrive
import CloudSyncTesting
import Foundation
import Testing

/// Google's own client, google-api-python-client, unmodified, against the emulator (scripts/drive_client.py): where
/// they disagree, the emulator is wrong.
@Suite(.timeLimit(.minutes(10))) struct DriveInteropTests {
    @Test func googlesPythonClientWorksAgainstTheEmulatorAndSharesFilesWithTheProvider() async throws {
        guard FileManager.default.isExecutableFile(atPath: Repository.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken)
        let swiftKey = "from-swift's key"
        #expect(succeeded(try await provider.set([KeyValue(swiftKey, "written by CloudSync ✓")])))
        host.clearLog()

        let result = try await ProcessRunner.run(
            Repository.python,
            [Repository.root + "/scripts/drive_client.py", host.endpoint.absoluteString, account.accessToken, swiftKey])
        #expect(result.status == 0, "\(result.standardError)")
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(seen["created"] as? String == "py-note")
        #expect(seen["listed"] as? Bool == true)
        #expect(seen["downloaded"] as? String == "hello from python")
        #expect(seen["updated"] as? String == "changed by python")
        #expect(seen["resumableChunks"] as? Int == 12)
        #expect(seen["resumableSize"] as? Int == 3 * 1024 * 1024)
        #expect(seen["resumableIntact"] as? Bool == true)
        #expect(seen["swiftValue"] as? String == "written by CloudSync ✓")
        #expect(seen["permissionId"] as? String == DriveFilesEmulator.permissionID(of: account.user))
        #expect(seen["hasLimit"] as? Bool == false)
        #expect(seen["changes"] as? Int == 3)
        #expect(seen["batchDeleted"] as? Int == 4)
        #expect(seen["remaining"] as? [String] == ["from-python", swiftKey, "py-note"].sorted())
        // The client used the protocols it was asked to: multipart, resumable chunks, one batch request.
        #expect(host.log.contains { $0.queryItems.contains { $0.name == "uploadType" && $0.value == "multipart" } })
        #expect(host.log.filter { $0.method == "PUT" && $0.path == "/upload/drive/v3/files" }.count == 12)
        #expect(host.count("POST", "/batch/drive/v3") == 1)

        // Where Google's client relies on Drive's reading of the API (fidelity_steps).
        #expect(seen["fieldsCreated"] as? [String] == ["id", "md5Checksum", "parents", "size"])
        // The MD5 of 256 × 4 bytes 0…255 then "fidelity", as Python's hashlib has it too.
        #expect(seen["md5Checksum"] as? String == "c61e194d8cb51d95dc6382d2ee047c5b")
        #expect(seen["md5Matches"] as? Bool == true)
        // `parents` carries the folder's id, not the alias the create named it by.
        #expect(seen["parents"] as? [String] == [DriveFilesEmulator.appDataFolderID(of: account.user)])
        #expect(seen["defaultGet"] as? [String] == ["id", "kind", "mimeType", "name"])
        #expect(seen["selectedGet"] as? [String: String] == ["name": "fidelity", "size": "1032"])
        #expect(seen["defaultList"] as? [String] == ["files", "incompleteSearch", "kind"])
        #expect(seen["defaultListFile"] as? [String] == ["id", "kind", "mimeType", "name"])
        #expect(seen["pagedNames"] as? [String] == (0..<5).map { "page-\($0)" })
        #expect(seen["pages"] as? Int == 3)
        #expect(seen["rangedChunks"] as? Int == 5)
        #expect(seen["rangedTotal"] as? Int == 1032)
        #expect(seen["rangedIntact"] as? Bool == true)
        let ranged = host.log.filter { $0.method == "GET" && $0.queryItems.contains { $0.value == "media" } }
            .compactMap { $0.headers["Range"] }
        #expect(
            ranged.suffix(5) == ["bytes=0-255", "bytes=256-511", "bytes=512-767", "bytes=768-1023", "bytes=1024-1279"])
        #expect(seen["generatedCount"] as? Int == 2)
        #expect(seen["generatedUsed"] as? Bool == true)
        #expect(seen["queried"] as? [String] == ["generated", "page-1"])

        let fresh = host.provider(refreshToken: account.refreshToken)
        #expect(
            try values(await fresh.get(["from-python", "py-note"])) == [
                "written by Google's client ✓", "changed by python",
            ])
    }
}
