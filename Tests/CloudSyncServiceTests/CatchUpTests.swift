import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState
@testable import CloudSyncService

/// `catchUp: true` at start: the service looks up the pipeline's last real run in its state (whoever ran it) and runs
/// the slot missed since, once; a dry run does not count as a run.
@Suite(.timeLimit(.minutes(5)))
struct CatchUpTests {
    @Test func aSlotMissedSinceTheLastRealRunRunsOnceAtStart() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("seed", count: 2)
        try PipelineText.directoryCopy(
            name: "hourly", source: "seed", destination: "out", state: "state",
            schedule: "{ every: 1h, catchUp: true }"
        ).write(toFile: directory.file("hourly.yaml"), atomically: true, encoding: .utf8)
        // The state says: a real run 3 hours ago, and a dry run a minute ago (which must not count).
        try FileManager.default.createDirectory(atPath: directory.file("state"), withIntermediateDirectories: true)
        do {
            let state = try StateDatabase(path: directory.file("state/state.db"))
            let now = Date()
            for (id, ago, dryRun) in [("hourly-1-1", 3 * 3600.0, false), ("hourly-2-1", 60.0, true)] {
                let at = ReportTime.string(now.addingTimeInterval(-ago))
                try state.record(
                    RunRecord(
                        id: id, startedAt: at, finishedAt: at, status: .ok, dryRun: dryRun, jobs: ["ok": 1],
                        report: nil))
            }
            state.close()
        }
        let lines = Protected<[String]>([])
        let service = PipelineService(
            PipelineService.Configuration(
                paths: [directory.file("hourly.yaml")], load: ServiceAPITests.Served.load,
                log: { line in lines.withLock { $0.append(line) } }))
        service.start()
        let deadline = ContinuousClock.now + .seconds(240)
        while ContinuousClock.now < deadline,
            service.pipelines.first.map({ $0.recent.isEmpty || $0.running != nil })
                ?? true
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        let status = try #require(service.pipelines.first)
        #expect(status.recent.count == 1)
        #expect(status.recent.first?.status == .ok)
        #expect(lines.withLock { $0 }.contains { $0.contains("was missed; running it now (catchUp)") })
        // The next slot is the next hour's, not another catch-up.
        let next = try #require(status.nextRun)
        #expect(next.slot > Date())
        await service.stop()
    }
}
