import CloudSyncEmulator
import CloudSyncTesting
import Foundation
import Testing

/// Runs through unreliable clouds and checks that three runs leave every provider holding every key.
///
/// The emulators (Google Drive, CloudKit) and moto behind a faulting proxy answer 20% of requests with 503, leave 5%
/// hanging and throttle 3% with 429 and `Retry-After`; every migrated key is counted exactly once.
@Suite(.serialized, .timeLimit(.minutes(10))) struct FaultPlanTests {
    static let keys = 30

    @Test func aSyncThroughFaultsConvergesWithinThreeRunsAndCountsEveryKeyOnce() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let moto = try await MotoS3Server.start(repository: Repository.root, buckets: ["faults"])
        let proxy = try ForwardingProxy(upstream: moto.endpoint)
        defer { proxy.server.stop() }
        let drive = DriveEmulator()
        let cloudKit = CloudKitEmulator()
        let emulators = try EmulatorServer(services: [drive, cloudKit])
        defer { emulators.server.stop() }
        let container = "iCloud.com.example.faults"
        let urls = try #require(emulators.urls["drive"])
        let environment = ProcessInfo.processInfo.environment.merging([
            "DRIVE": urls["endpoint"] ?? "", "DRIVE_TOKEN": urls["tokenEndpoint"] ?? "",
            "DRIVE_CLIENT": urls["clientId"] ?? "", "DRIVE_SECRET": urls["clientSecret"] ?? "",
            "DRIVE_REFRESH": drive.oauth.issueTokens(user: "faults@example.com").refreshToken,
            "CLOUDKIT": emulators.baseURL.absoluteString, "CK_API": CloudKitWebAuthEmulator.defaultAPIToken,
            "CK_WEB": cloudKit.webAuth.issueToken(container: container, environment: "development"),
            "S3": proxy.endpoint.absoluteString, "HOME": directory.path,
        ]) { $1 }
        let items = (0..<Self.keys).map { "      k\($0): 'value \($0)'\n" }.joined()
        let pipeline = directory.file("faults.yaml")
        try """
        version: 1
        name: faults
        providers:
          seed:
            type: memory
            items:
        \(items)
          local: { type: directory, path: data/local, create: true }
          drive:
            type: googleDrive
            clientId: ${env:DRIVE_CLIENT}
            clientSecret: ${env:DRIVE_SECRET}
            refreshToken: ${env:DRIVE_REFRESH}
            endpoint: ${env:DRIVE}
            tokenEndpoint: ${env:DRIVE_TOKEN}
            timeoutMs: 3000
          cloud:
            type: cloudKit
            container: \(container)
            environment: development
            apiToken: ${env:CK_API}
            webAuthToken: ${env:CK_WEB}
            endpoint: ${env:CLOUDKIT}
            timeoutMs: 3000
          bucket:
            type: s3
            bucket: faults
            endpoint: ${env:S3}
            accessKeyId: faults
            secretAccessKey: faults
            timeoutMs: 3000
        store:
          providers: [local, drive, cloud, bucket]
          writeMode: mirror
          timeoutMs: 6000
        jobs:
          - { type: migrate, name: to-local, from: seed, to: local, overwrite: ifMissing }
          - { type: migrate, name: to-drive, from: local, to: drive, overwrite: ifMissing }
          - { type: migrate, name: to-cloud, from: local, to: cloud, overwrite: ifMissing }
          - { type: migrate, name: to-bucket, from: local, to: bucket, overwrite: ifMissing }
          - { type: sync, name: sync }

        """.write(toFile: pipeline, atomically: true, encoding: .utf8)

        let faults = HTTPFaultPlan([
            .hang(on: .rate(0.05, seed: 5)),
            .tooManyRequests(retryAfterSeconds: 1, on: .rate(0.03, seed: 3)),
            .errorRate(0.2, seed: 20, status: 503),
        ])
        emulators.server.setFaultPlan(faults)
        proxy.server.setFaultPlan(faults)

        func run(_ extra: [String] = []) async throws -> [String: Any] {
            let result = try await ProcessRunner.run(
                executable, ["run", "--report", "-"] + extra + [pipeline], environment: environment)
            return try #require(
                try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
                "no report: \(result.standardError)")
        }
        func jobs(_ report: [String: Any]) -> [String: [String: Any]] {
            let list = report["jobs"] as? [[String: Any]] ?? []
            return Dictionary(
                uniqueKeysWithValues: list.compactMap { job in (job["name"] as? String).map { ($0, job) } })
        }

        var statuses: [String] = []
        for _ in 1...3 {
            let report = try await run()
            statuses.append(report["status"] as? String ?? "?")
            for (name, job) in jobs(report) where name.hasPrefix("to-") && job["status"] as? String != "error" {
                let counts = job["counts"] as? [String: Int] ?? [:]
                // Each key of the source is copied, skipped (already there) or failed: once, never twice or not at all.
                #expect(
                    (counts["copied"] ?? 0) + (counts["skipped"] ?? 0) + (counts["failed"] ?? 0) == Self.keys,
                    "\(name): \(counts)")
            }
            if let sync = jobs(report)["sync"], sync["status"] as? String != "error" {
                #expect((sync["counts"] as? [String: Int])?["keys"] == Self.keys, "sync: \(sync)")
            }
        }
        #expect(emulators.server.requestLog.count > 4 * Self.keys, "the emulators saw too few requests")

        // Without faults, a dry run reads every copy of every key and finds nothing to repair.
        emulators.server.setFaultPlan(HTTPFaultPlan())
        proxy.server.setFaultPlan(HTTPFaultPlan())
        let check = try await run(["--dry-run", "--job", "sync"])
        let counts = jobs(check)["sync"]?["counts"] as? [String: Int]
        #expect(counts?["keys"] == Self.keys, "after runs ending \(statuses): \(counts ?? [:])")
        #expect(counts?["inSync"] == Self.keys, "after runs ending \(statuses): \(counts ?? [:])")
    }
}
