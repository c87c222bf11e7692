import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The built `cloudsync-emulator` (Drive and CloudKit on one port) and `cloudsync` running
/// `pipelines/cloudkit-tiered.yaml` as the README shows.
@Suite(.timeLimit(.minutes(10))) struct TieredExamplePipelineTests {
    static let container = "iCloud.com.example.cloudsync"
    static let largeKey = "drafts.large-attachment"

    /// Signs in to the emulator's CloudKit as a person would in a browser: ask for the caller with only the API
    /// token, open the sign-in address of the `AUTHENTICATION_REQUIRED` answer, copy the token the page shows.
    static func webAuthToken(endpoint: String, apiToken: String) async throws -> String {
        let caller = appendingQuery(
            URL(string: endpoint + "/database/1/\(container)/development/public/users/caller")!,
            [("ckAPIToken", apiToken)])
        let refused = try await URLSessionTransport().send(HTTPRequest(method: .get, url: caller))
        #expect(refused.status == 421)
        let body = try JSONSerialization.jsonObject(with: refused.body) as? [String: Any]
        let redirect = try #require(body?["redirectURL"] as? String)
        let page = String(decoding: try await TestBrowser.open(URL(string: redirect)!).body, as: UTF8.self)
        let start = try #require(page.range(of: "<code id=\"ckWebAuthToken\">"))
        return String(page[start.upperBound...].prefix { $0 != "<" })
    }

    static func json(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] ?? [:]
    }

    @Test func smallValuesLandInCloudKitAndOneOverItsRecordLimitInDrive() async throws {
        let directory = try TemporaryDirectory()
        let pipelines = Repository.root + "/pipelines"
        for item in ["cloudkit-tiered.yaml", "demo-data"] {
            try FileManager.default.copyItem(atPath: pipelines + "/" + item, toPath: directory.path + "/" + item)
        }
        // The shipped sample has nothing over 900 KB; add one value of 1.2 MB, past cloudKit's recordMaxBytes.
        let sample = directory.path + "/demo-data/sample.export.json"
        var export = try Self.json(sample)
        var items = try #require(export["items"] as? [String: String])
        let sampleKeys = Set(items.keys)
        items[Self.largeKey] = String(repeating: "x", count: 1_200_000)
        export["items"] = items
        export["count"] = items.count
        try JSONSerialization.data(withJSONObject: export).write(to: URL(fileURLWithPath: sample))

        let data = directory.path + "/emulator"
        let emulator = try RunningProcess(
            try ProcessRunner.builtProduct("cloudsync-emulator"), ["--drive", "--cloudkit", "--data", data])
        let line = try #require(await emulator.line())
        let urls = try #require(
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])
        let cloudKit = try #require(urls["cloudkit"])
        let drive = try #require(urls["drive"])
        #expect(cloudKit["endpoint"] == drive["endpoint"], "one emulator, one port")
        let token = try await Self.webAuthToken(endpoint: cloudKit["endpoint"]!, apiToken: cloudKit["apiToken"]!)
        var environment = ProcessInfo.processInfo.environment
        environment.merge(
            [
                "CK_ENDPOINT": cloudKit["endpoint"]!, "CK_API_TOKEN": cloudKit["apiToken"]!, "CK_WEB_AUTH_TOKEN": token,
                "GDRIVE_ENDPOINT": drive["endpoint"]!, "GDRIVE_TOKEN_ENDPOINT": drive["tokenEndpoint"]!,
                "GDRIVE_AUTH_ENDPOINT": drive["authEndpoint"]!, "GDRIVE_REFRESH_TOKEN": drive["refreshToken"]!,
            ]
        ) { $1 }
        let run = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), ["run", "cloudkit-tiered.yaml", "--quiet", "--report", "-"],
            environment: environment, currentDirectory: directory.path)
        emulator.signal(SIGTERM)
        #expect(await emulator.exited().status == 0)
        #expect(run.status == 0, "\(run.standardOutput)\(run.standardError)")
        for secret in [token, drive["refreshToken"]!] {
            #expect(!run.standardOutput.contains(secret) && !run.standardError.contains(secret))
        }
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        let jobs = report["jobs"] as? [[String: Any]] ?? []
        #expect(jobs.map { $0["status"] as? String } == ["ok", "ok", "ok"], "\(jobs)")
        let counts = jobs.map { $0["counts"] as? [String: Int] ?? [:] }
        #expect(counts.first?["imported"] == items.count)
        #expect(counts.dropFirst().map { $0["checked"] } == [sampleKeys.count, 1])

        // What each cloud holds, from the emulator's saved state.
        let databases = (try Self.json(data + "/cloudkit.json")["database"] as? [String: Any])?["databases"]
        let database = try #require((databases as? [String: Any])?.values.first as? [String: Any])
        let zone = (database["zones"] as? [String: Any])?["CloudSyncZone"] as? [String: Any]
        let records = try #require(zone?["records"] as? [String: Any])
        #expect(Set(records.keys).symmetricDifference(sampleKeys).isEmpty, "keys in one of them only")
        let accounts = (try Self.json(data + "/drive.json")["files"] as? [String: Any])?["accounts"]
        let account = try #require((accounts as? [String: Any])?.values.first as? [String: Any])
        let files = try #require(account["files"] as? [String: [String: Any]])
        #expect(files.values.map { $0["name"] as? String } == [Self.largeKey])
        let content = try #require((files.values.first?["content"] as? String).flatMap { Data(base64Encoded: $0) })
        #expect(content.count == 1_200_000)
    }
}
