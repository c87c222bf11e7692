import CloudSync
import CloudSyncLocal
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState
@testable import CloudSyncRunner

/// The outbox drain every runner of a run shares when the state is in PostgreSQL: entries claimed once each, the
/// outbox's rules applied to each outcome, and no claim possible once the starter closed the drain or when the runner
/// that opened it is gone.
@Suite(.timeLimit(.minutes(10))) struct SharedOutboxDrainTests {
    private func compile(schema: String, in directory: TemporaryDirectory, url: String) throws -> CompiledPipeline {
        let environment = ["STATE_URL": url]
        let source = """
            version: 1
            name: drained
            state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
            providers:
              to: { type: directory, path: data/to, create: true }
            store:
              providers: [to]
            jobs:
              - { type: flush, name: retry }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    private func entry(_ id: Int64, key: String, operation: FailedWrite.Operation = .set, enqueuedAtMs: Int64)
        -> OutboxEntry
    {
        OutboxEntry(
            id: id, key: key, operation: operation, encodedValue: operation == .set ? "queued \(key)" : nil,
            provider: "to", attempts: 1, nextAttemptAtMs: 0, enqueuedAtMs: enqueuedAtMs, lastErrorCode: "ERR_OFFLINE")
    }

    /// Four runners, all `--join`, over one queue of sets, removes and entries past their age: each set and remove
    /// arrives, the expired ones are given up unsent, the runners' deliveries add up to the entries (a claim taken
    /// twice would count twice), and nothing is left queued.
    @Test func fourRunnersDrainOneQueueAndEachEntryCountsOnce() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let compiled = try compile(schema: PostgresServer.uniqueName("drain"), in: directory, url: server.url)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let removed = (0..<50).map { String(format: "gone-%03d", $0) }
        let target = try DirectoryProvider(root: directory.file("data/to"))
        _ = try await target.set(removed.map { KeyValue($0, "stale") })
        await target.close()
        let sets = (0..<1200).map { String(format: "key-%05d", $0) }
        let expired = (0..<30).map { String(format: "old-%03d", $0) }
        var entries: [OutboxEntry] = []
        for key in sets { entries.append(entry(Int64(entries.count + 1), key: key, enqueuedAtMs: now)) }
        for key in removed {
            entries.append(entry(Int64(entries.count + 1), key: key, operation: .remove, enqueuedAtMs: now))
        }
        // Older than the default maxAge of seven days.
        for key in expired {
            entries.append(entry(Int64(entries.count + 1), key: key, enqueuedAtMs: now - 8 * 24 * 3_600_000))
        }
        try await queue(entries, in: compiled)
        let outcomes = try await joinedRuns(of: compiled, runners: 4)
        let reports = outcomes.filter { $0.joined == nil }
        try #require(reports.count == 1, "exactly one runner started the run and wrote the report")
        let report = reports[0].report
        #expect(report.status == .ok, "\(report.json())")
        #expect(report.outbox.pendingBefore == entries.count)
        #expect(report.outbox.drained == sets.count + removed.count)
        #expect(report.outbox.dropped == ["expired": expired.count])
        #expect(report.outbox.pendingAfter == 0)
        let byRunner = try #require(report.outbox.drainedBy)
        #expect(byRunner.values.reduce(0, +) == sets.count + removed.count, "\(byRunner)")
        let stored = try await DirectoryProvider(root: directory.file("data/to"))
        let page = try await stored.listKeys(after: nil, limit: 5000)
        #expect(page.keys.sorted() == sets, "every set arrived, every remove removed, no expired entry was sent")
        let values = try await stored.get(sets)
        #expect(zip(sets, values).allSatisfy { key, value in (try? value.get()) == "queued \(key)" })
        await stored.close()
        let left = try await offPool {
            let state = try PostgresStateDatabase(compiled.spec.sharedState!, pipeline: "drained")
            defer { state.close() }
            return try PostgresOutboxStorage(state: state).loadAll().count
        }
        #expect(left == 0)
    }

    /// Entries for a provider no runner can reach are left as they were (no attempt spent, nothing dropped), and the
    /// others are delivered around them.
    @Test func anUnreachableProvidersEntriesWaitUntouched() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let environment = ["STATE_URL": server.url]
        let spec = try PipelineLoader.load(
            source: """
                version: 1
                name: drained
                state: { postgresql: "${env:STATE_URL}", schema: \(PostgresServer.uniqueName("unreach")) }
                providers:
                  to: { type: directory, path: data/to, create: true }
                  gone: { type: directory, path: data/unmounted }
                store:
                  providers: [to, gone]
                jobs:
                  - { type: flush, name: retry }
                """, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        let compiled = try PipelineCompiler.compile(spec, environment: environment)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var entries = (1...10).map { entry(Int64($0), key: "here-\($0)", enqueuedAtMs: now) }
        for number in 11...15 {
            var waiting = entry(Int64(number), key: "there-\(number)", enqueuedAtMs: now)
            waiting.provider = "gone"
            entries.append(waiting)
        }
        try await queue(entries, in: compiled)
        let outcomes = try await joinedRuns(of: compiled, runners: 2)
        let report = try #require(outcomes.first { $0.joined == nil }?.report)
        #expect(report.outbox.drained == 10, "\(report.json())")
        #expect(report.outbox.dropped.isEmpty)
        #expect(report.outbox.pendingAfter == 5)
        let left = try await offPool {
            let state = try PostgresStateDatabase(compiled.spec.sharedState!, pipeline: "drained")
            defer { state.close() }
            return try PostgresOutboxStorage(state: state).loadAll()
        }
        #expect(left.map(\.key) == (11...15).map { "there-\($0)" })
        #expect(left.allSatisfy { $0.attempts == 1 && $0.nextAttemptAtMs == 0 }, "no attempt spent")
    }

    /// A drain counts as open only while the runner that opened it holds the run lock: one left open by a runner that
    /// died is never worked on beside a later run's jobs, and a closed one hands out nothing.
    @Test func onlyTheLockHoldersOpenDrainHandsOutEntries() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let compiled = try compile(schema: PostgresServer.uniqueName("drainlock"), in: directory, url: server.url)
        let spec = compiled.spec.sharedState!
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let state = try await offPool { try PostgresStateDatabase(spec, pipeline: "drained") }
        try await offPool {
            try PostgresOutboxStorage(state: state).commit(
                storing: [entry(1, key: "a", enqueuedAtMs: now)], deleting: [])
        }
        let drain = try await PostgresOutboxDrain.open(state)
        let claim = { () async throws -> Int? in
            try await drain.claim(limit: 10, excluding: [], runner: "test") { _ in DrainSettlement() }
        }

        // Opened with nobody holding the run lock (its opener died): closed to everyone.
        try await drain.start(runID: "dead", held: [], dueBy: now, at: "then")
        #expect(try await drain.isOpen() == false)
        #expect(try await claim() == nil)

        // Opened by the lock holder: open, and the entry is handed out.
        let lock = try await offPool { try PostgresRunLock.acquire(state) }
        guard case .acquired = lock else {
            Issue.record("the run lock was not acquired: \(lock)")
            return
        }
        try await drain.start(runID: "live", held: [], dueBy: now, at: "now")
        #expect(try await drain.isOpen())
        #expect(try await claim() == 1)

        // Held providers' entries are not handed out.
        try await drain.start(runID: "live", held: ["to"], dueBy: now, at: "now")
        #expect(try await claim() == 0)

        // Closed: nothing more.
        try await drain.start(runID: "live", held: [], dueBy: now, at: "now")
        _ = try await drain.finish()
        #expect(try await drain.isOpen() == false)
        #expect(try await claim() == nil)
        await drain.close()
        state.close()
    }

    /// Writes `entries` to the shared outbox of the pipeline `drained`, off the concurrency pool (libpq blocks).
    private func queue(_ entries: [OutboxEntry], in compiled: CompiledPipeline) async throws {
        try await offPool {
            let state = try PostgresStateDatabase(compiled.spec.sharedState!, pipeline: "drained")
            try PostgresOutboxStorage(state: state).commit(storing: entries, deleting: [])
            state.close()
        }
    }
}
