import CloudSyncEmulator
import CloudSyncTesting
import Foundation
import Testing

/// What `cloudsync run` costs in requests: the protocol minimum `make bench` states, because a job's pages are a
/// multiple of every involved provider's batch size.
@Suite(.timeLimit(.minutes(10))) struct RequestCountTests {
    static let keys = 1_000

    @Test func aRunWritesReadsAndRemovesAThousandCloudKitRecordsInFiveRequestsEach() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let cloudKit = CloudKitEmulator()
        let emulators = try EmulatorServer(services: [cloudKit])
        defer { emulators.server.stop() }
        let container = "iCloud.com.example.requests"
        let environment = ProcessInfo.processInfo.environment.merging([
            "CLOUDKIT": emulators.baseURL.absoluteString, "CK_API": CloudKitWebAuthEmulator.defaultAPIToken,
            "CK_WEB": cloudKit.webAuth.issueToken(container: container, environment: "development"),
            "HOME": directory.path,
        ]) { $1 }
        let items = (0..<Self.keys).map { "      key.\($0): 'value \($0)'\n" }.joined()
        let pipeline = directory.file("requests.yaml")
        try """
        version: 1
        name: requests
        providers:
          seed:
            type: memory
            items:
        \(items)
          cloud:
            type: cloudKit
            container: \(container)
            environment: development
            apiToken: ${env:CK_API}
            webAuthToken: ${env:CK_WEB}
            endpoint: ${env:CLOUDKIT}
        store:
          providers: [seed]
        jobs:
          - { type: migrate, name: upload, from: seed, to: cloud }
          - { type: check, name: compare, from: seed, to: cloud, needs: [upload] }
          - { type: clear, name: remove, provider: cloud, confirm: true, needs: [compare] }

        """.write(toFile: pipeline, atomically: true, encoding: .utf8)

        func run(_ job: String) async throws -> [String: Int] {
            emulators.server.clearLog()
            let result = try await ProcessRunner.run(
                executable, ["run", "--report", "-", "--no-needs", "--job", job, pipeline], environment: environment)
            #expect(result.status == 0, "\(job): \(result.standardError)")
            var operations: [String: Int] = [:]
            for entry in emulators.server.requestLog where entry.path.contains("/records/") {
                operations[String(entry.path.split(separator: "/").suffix(2).joined(separator: "/")), default: 0] += 1
            }
            return operations
        }

        // The first write to a new container also creates its zone; the second shows the steady cost.
        _ = try await run("upload")
        // CloudKit takes 200 records a request: 1,000 keys are 5 requests, whatever the job.
        let uploaded = try await run("upload")
        #expect(uploaded["records/modify"] == 5, "\(uploaded)")
        let compared = try await run("compare")
        #expect(compared["records/lookup"] == 5, "\(compared)")
        #expect(compared["records/modify"] == nil, "\(compared)")
        let removed = try await run("remove")
        #expect(removed["records/modify"] == 5, "\(removed)")
    }
}
