import CloudSyncEmulator
import CloudSyncTesting
import Foundation
import Testing

/// What `cloudsync run` costs in requests against the CloudKit emulator: the protocol minimum `make bench` states,
/// because a job's pages are a multiple of every involved provider's batch size, and nothing for a mirror whose
/// snapshot vouches for every record.
@Suite(.timeLimit(.minutes(10))) struct RequestCountTests {
    static let keys = 1_000

    /// A CloudKit emulator, and a pipeline file beside a memory provider `seed` of ``keys`` keys and a cloudKit
    /// provider `cloud`.
    final class Fixture {
        let executable: String
        let directory: TemporaryDirectory
        let cloudKit = CloudKitEmulator()
        let emulators: EmulatorServer
        let environment: [String: String]
        let pipeline: String

        init(jobs: String) throws {
            executable = try ProcessRunner.builtProduct("cloudsync")
            directory = try TemporaryDirectory()
            emulators = try EmulatorServer(services: [cloudKit])
            let container = "iCloud.com.example.requests"
            environment = ProcessInfo.processInfo.environment.merging([
                "CLOUDKIT": emulators.baseURL.absoluteString, "CK_API": CloudKitWebAuthEmulator.defaultAPIToken,
                "CK_WEB": cloudKit.webAuth.issueToken(container: container, environment: "development"),
                "HOME": directory.path,
            ]) { $1 }
            let items = (0..<RequestCountTests.keys).map { "      key.\($0): 'value \($0)'\n" }.joined()
            pipeline = directory.file("requests.yaml")
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
            \(jobs)
            """.write(toFile: pipeline, atomically: true, encoding: .utf8)
        }

        deinit { emulators.server.stop() }

        /// Runs `job` alone and counts the emulator's record requests by operation (`records/modify`, …).
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
    }

    @Test func aRunWritesReadsAndRemovesAThousandCloudKitRecordsInFiveRequestsEachAndARerunWritesNone() async throws {
        let fixture = try Fixture(
            jobs: """
                  - { type: migrate, name: upload, from: seed, to: cloud }
                  - { type: check, name: compare, from: seed, to: cloud }
                  - { type: clear, name: remove, provider: cloud, confirm: true }

                """)
        // The first write to a new container also creates its zone.
        _ = try await fixture.run("upload")
        // The migration kept each record's change tag: run again with nothing new, it lists and writes nothing.
        let again = try await fixture.run("upload")
        #expect(again["records/modify"] == nil && again["records/lookup"] == nil, "\(again)")
        // CloudKit takes 200 records a request: 1,000 keys are 5 requests, whatever the job.
        let compared = try await fixture.run("compare")
        #expect(compared["records/lookup"] == 5, "\(compared)")
        #expect(compared["records/modify"] == nil, "\(compared)")
        let removed = try await fixture.run("remove")
        #expect(removed["records/modify"] == 5, "\(removed)")
        // Into the zone that exists now, the steady cost of writing them all.
        let uploaded = try await fixture.run("upload")
        #expect(uploaded["records/modify"] == 5, "\(uploaded)")
    }

    @Test func aMirrorWhoseSnapshotVouchesForEveryRecordReadsAndWritesNone() async throws {
        let fixture = try Fixture(jobs: "  - { type: mirror, name: backup, from: seed, to: cloud }\n")
        let first = try await fixture.run("backup")
        #expect(first["records/lookup"] == nil, "\(first)")
        // The snapshot keeps the change tag each save answered, which the zone's listing gives the record too: the
        // next run reads none of them again. (A memory source is read on every run: its tags belong to the process
        // that made them.)
        for _ in 0..<2 {
            let again = try await fixture.run("backup")
            #expect(again["records/lookup"] == nil && again["records/modify"] == nil, "\(again)")
        }
    }
}
