import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncService

/// `store.outbox.autoFlush`: between runs, the service delivers what waits in a pipeline's outbox on its timer, and
/// says what is left, by provider.
@Suite(.timeLimit(.minutes(5)))
struct AutoFlushTests {
    @Test func queuedWritesAreDeliveredBetweenRunsAndWhatIsNotDueStays() async throws {
        let directory = try TemporaryDirectory()
        try """
        version: 1
        name: flushed
        state: state
        providers:
          from: { type: directory, path: from, create: true }
          to: { type: directory, path: to, create: true }
        store:
          providers: [from, to]
          outbox: { autoFlush: { every: 1s } }
        jobs:
          - { type: flush }
        """.write(toFile: directory.file("flushed.yaml"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory.file("state"), withIntermediateDirectories: true)
        let now = SystemClock().nowMilliseconds()
        do {
            let storage = try SQLiteOutboxStorage(path: directory.file("state/outbox.db"))
            for (id, key, due) in [(1, "a", Int64(0)), (2, "b", Int64(0)), (3, "later", now + 3_600_000)] {
                try storage.replace(
                    OutboxEntry(
                        id: Int64(id), key: key, operation: .set, encodedValue: "value of \(key)", provider: "to",
                        attempts: 1, nextAttemptAtMs: due, enqueuedAtMs: now, lastErrorCode: "ERR_OFFLINE"))
            }
        }
        let service = PipelineService(
            PipelineService.Configuration(
                paths: [directory.file("flushed.yaml")], load: ServiceAPITests.Served.load, log: { _ in }))
        service.start()

        let deadline = ContinuousClock.now + .seconds(240)
        while ContinuousClock.now < deadline, service.pipelines.first?.flushes.runs ?? 0 < 1 {
            try await Task.sleep(for: .milliseconds(50))
        }
        await service.stop()
        let status = try #require(service.pipelines.first)
        #expect(status.flushes.runs >= 1)
        #expect(status.flushes.drained == 2)
        #expect(status.flushes.failures == 0)
        #expect(status.outboxPending == ["to": 1], "the entry not yet due stays, counted for its provider")
        #expect(status.recent.isEmpty, "a flush is not a run")
        let to = try DirectoryProvider(root: directory.file("to"))
        #expect(try await to.get(["a", "b", "later"]).map { try $0.get() } == ["value of a", "value of b", nil])
        await to.close()
        let metrics = ServiceMetrics.render(service.pipelines, failedFiles: [:], startedAt: service.startedAt)
        #expect(metrics.contains("cloudsync_pipeline_outbox_flushed_total{pipeline=\"flushed\"} 2"))
        #expect(metrics.contains("cloudsync_pipeline_outbox_pending{pipeline=\"flushed\",provider=\"to\"} 1"))
    }
}
