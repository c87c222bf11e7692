import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// `--join` helps a run under way and never starts one; `--run-id` names a run, so its runners find it and a rerun of
/// a finished name does nothing. (A late joiner used to start a second full run once the starter had finished.)
@Suite(.timeLimit(.minutes(10))) struct JoinNeverStartsTests {
    private func compiled(in directory: TemporaryDirectory, url: String, keys: Int = 300) async throws
        -> CompiledPipeline
    {
        let source = try DirectoryProvider(root: directory.file("data/from"))
        _ = try await source.set((0..<keys).map { KeyValue(String(format: "k%05d", $0), "v\($0)") })
        await source.close()
        let text = """
            version: 1
            name: joined
            state: { postgresql: "${env:STATE_URL}", schema: \(PostgresServer.uniqueName("join")) }
            providers:
              from: { type: directory, path: data/from }
              to: { type: directory, path: data/to, create: true }
            store:
              providers: [to]
            jobs:
              - { type: migrate, name: copy, from: from, to: to, shards: 4 }
            """
        let environment = ["STATE_URL": url]
        let spec = try PipelineLoader.load(
            source: text, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    private func run(_ compiled: CompiledPipeline, join: Bool = false, id: String? = nil, wait: Duration = .zero)
        async throws -> RunOutcome
    {
        var options = RunOptions()
        options.join = join
        options.runID = id
        options.joinWait = wait
        return try await PipelineRunner(compiled, options: options).run()
    }

    @Test func aJoinerWithNoRunUnderWayDoesNothing() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let pipeline = try await compiled(in: directory, url: server.url)
        let alone = try await run(pipeline, join: true)
        #expect(alone.status == .ok)
        #expect(alone.joined == JoinedRun(run: nil, ranges: [:]))
        #expect(try PipelineHistory.runs(of: pipeline, limit: 10).isEmpty, "no run was started")
        #expect(!FileManager.default.fileExists(atPath: directory.file("data/to/k00000")))
    }

    @Test func aLateJoinerDoesNotStartASecondRun() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let pipeline = try await compiled(in: directory, url: server.url)
        let first = try await run(pipeline)
        #expect(first.status == .ok && first.report.jobs.first?.counts["copied"] == 300)
        // Two stragglers of the same night, unnamed: the run they were meant to help has ended.
        for _ in 0..<2 {
            let late = try await run(pipeline, join: true)
            #expect(late.joined?.run == nil && late.report.jobs.isEmpty)
        }
        #expect(try PipelineHistory.runs(of: pipeline, limit: 10).count == 1)
    }

    @Test func aNamedRunThatFinishedIsNotRunAgainAndItsJoinersStopWaiting() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let pipeline = try await compiled(in: directory, url: server.url)
        let first = try await run(pipeline, id: "nightly-2026-12-06")
        #expect(first.status == .ok && first.report.runId == "nightly-2026-12-06")
        // The scheduler retries the job, or starts a second pod of it: the run is done.
        let again = try await run(pipeline, id: "nightly-2026-12-06")
        #expect(again.alreadyFinished?.id == "nightly-2026-12-06" && again.report.jobs.isEmpty)
        // A joiner that would wait a minute for the run to start learns at once that it has finished.
        let late = try await run(pipeline, join: true, id: "nightly-2026-12-06", wait: .seconds(60))
        #expect(late.joined?.run == nil && late.alreadyFinished?.status == .ok)
        // Another name is another run.
        let next = try await run(pipeline, id: "nightly-2026-12-07")
        #expect(next.alreadyFinished == nil && next.report.jobs.first?.status == .ok)
        #expect(
            try PipelineHistory.runs(of: pipeline, limit: 10).map(\.id) == ["nightly-2026-12-07", "nightly-2026-12-06"])
    }

    /// Runners of one named run started at once, all alike: one runs it, the others help it or, arriving after it
    /// ended, do nothing; every key is copied once.
    @Test func runnersStartedAlikeWithOneNameRunItOnce() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let pipeline = try await compiled(in: directory, url: server.url, keys: 1_200)
        let outcomes = try await withThrowingTaskGroup(of: RunOutcome.self) { group in
            for _ in 0..<4 { group.addTask { try await run(pipeline, id: "pods-1") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let starters = outcomes.filter { $0.joined == nil && $0.alreadyFinished == nil }
        try #require(starters.count == 1, "\(outcomes.map { ($0.joined, $0.alreadyFinished?.id) })")
        #expect(starters[0].report.jobs.first?.counts["copied"] == 1_200)
        #expect(outcomes.allSatisfy { $0.status == .ok })
        #expect(try PipelineHistory.runs(of: pipeline, limit: 10).count == 1)
    }

    /// With the state in a directory too, a named run that finished is not run again, and a dry run under a name does
    /// not stand for the run it rehearses.
    @Test func aNamedRunWithItsStateInADirectoryRunsOnce() async throws {
        let directory = try TemporaryDirectory()
        func compiled(_ items: String) throws -> CompiledPipeline {
            let text = """
                version: 1
                name: named
                providers:
                  from: { type: memory, items: { \(items) } }
                  to: { type: sqlite, path: data/to.db, create: true }
                store: { providers: [to] }
                jobs:
                  - { type: migrate, name: copy, from: from, to: to }
                """
            let spec = try PipelineLoader.load(
                source: text, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
                environment: [:])
            return try PipelineCompiler.compile(spec, environment: [:])
        }
        let first = try await run(try compiled("a: '1'"), id: "cron-1")
        #expect(first.status == .ok && first.report.runId == "cron-1")
        let again = try await run(try compiled("a: '1'"), id: "cron-1")
        #expect(again.alreadyFinished?.id == "cron-1" && again.report.jobs.isEmpty)
        // A dry run under the name rehearses it without standing for it.
        var rehearsal = RunOptions()
        rehearsal.runID = "cron-2"
        rehearsal.dryRun = true
        let dry = try await PipelineRunner(try compiled("a: '1'"), options: rehearsal).run()
        #expect(dry.report.runId != "cron-2" && dry.alreadyFinished == nil)
        let real = try await run(try compiled("a: '1'"), id: "cron-2")
        #expect(real.alreadyFinished == nil && real.report.jobs.first?.status == .ok)
    }
}
