import CloudSync
import CloudSyncLocal
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState
@testable import CloudSyncRunner

/// Jobs split into key ranges between runners sharing a PostgreSQL state (`shards: N`, `cloudsync run --join`),
/// run in one process: several runners, a runner that stopped mid-range, and what the report says of each.
@Suite(.timeLimit(.minutes(10))) struct ShardedJobTests {
    /// `count` keys in a directory provider at `data/from`, with awkward names among them.
    private func seed(_ directory: TemporaryDirectory, count: Int) async throws -> [String] {
        let keys = (0..<count).map { String(format: "k%05d", $0) } + ["é-accent", "日本", "z/🌍", "a b"]
        let source = try DirectoryProvider(root: directory.file("data/from"))
        _ = try await source.set(keys.map { KeyValue($0, "value of \($0)") })
        await source.close()
        return keys
    }

    private func pipeline(schema: String, shards: Int) -> String {
        """
        version: 1
        name: sharded
        state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
        providers:
          from: { type: directory, path: data/from }
          to: { type: directory, path: data/to, create: true }
        store:
          providers: [to]
        jobs:
          - { type: migrate, name: copy, from: from, to: to, shards: \(shards) }
        """
    }

    private func compile(_ source: String, in directory: TemporaryDirectory, url: String) throws -> CompiledPipeline {
        let environment = ["STATE_URL": url]
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    private func stored(_ directory: TemporaryDirectory) async throws -> [String: String] {
        let destination = try DirectoryProvider(root: directory.file("data/to"))
        defer { Task { await destination.close() } }
        var all: [String: String] = [:]
        var cursor: String?
        repeat {
            let page = try await destination.listKeys(after: cursor, limit: 1000)
            for (key, value) in zip(page.keys, try await destination.get(page.keys)) { all[key] = try value.get() }
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    /// Four runners in one process, all `--join`: the first takes the lock and splits the job, the others lease
    /// ranges beside it; every key arrives, the counts sum to the keys, and each runner's share is named.
    @Test func fourRunnersShareTheRangesAndTheCountsAddUp() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory, count: 1500)
        let compiled = try compile(
            pipeline(schema: PostgresServer.uniqueName("shard"), shards: 8), in: directory, url: server.url)
        let outcomes = try await joinedRuns(of: compiled, runners: 4)
        let reports = outcomes.filter { $0.joined == nil }
        try #require(reports.count == 1, "exactly one runner started the run and wrote the report")
        let report = reports[0].report
        #expect(report.status == .ok, "\(report.json())")
        let job = try #require(report.jobs.first)
        #expect(job.counts["copied"] == keys.count)
        let shards = try #require(job.shards)
        #expect(shards.count == 8)
        #expect(shards.takenOver == 0)
        #expect(shards.runners.reduce(0) { $0 + ($1.counts["copied"] ?? 0) } == keys.count)
        #expect(shards.runners.reduce(0) { $0 + $1.ranges } == 8)
        #expect(outcomes.allSatisfy { $0.status == .ok })
        let copied = try await stored(directory)
        #expect(copied.count == keys.count)
        #expect(keys.allSatisfy { copied[$0] == "value of \($0)" })
    }

    /// A runner that recorded part of a range and died: the next run resumes the stopped run's ranges (its plan is
    /// the same), takes the dead runner's range over after the last key it recorded, and copies nothing twice.
    @Test func aRangeWhoseRunnerDiedIsTakenOverAfterItsLastRecordedKey() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory, count: 2000)
        let compiled = try compile(
            pipeline(schema: PostgresServer.uniqueName("takeover"), shards: 4), in: directory, url: server.url)
        let job = try #require(compiled.spec.jobs.first)
        let plan = job.type + ": " + job.job.plan(paths: PlanPaths(directory: directory.path))
        let sorted = keys.sorted { StoreKey.bytesPrecede($0, $1) }
        let ranges = [
            KeyRange(after: nil, through: sorted[999]), KeyRange(after: sorted[999], through: sorted[1499]),
            KeyRange(after: sorted[1499], through: nil),
        ]

        // The earlier run: its runner leased the first range, copied and recorded its first 600 keys, then died.
        let dead = try PostgresStateDatabase(try #require(compiled.spec.sharedState), pipeline: "sharded")
        try dead.startShardedJob(
            "copy", runID: "sharded-earlier", plan: plan, ranges: ranges, at: "2026-12-04T02:30:00Z")
        let leased = try #require(try dead.leaseShard("copy", runner: "gone/1", leaseMs: 3_600_000))
        #expect(leased.shard == 0 && leased.range == ranges[0])
        let destination = try DirectoryProvider(root: directory.file("data/to"))
        _ = try await destination.set(sorted[..<600].map { KeyValue($0, "value of \($0)") })
        await destination.close()
        #expect(
            try dead.recordShardBatch(
                "copy", shard: 0, runner: "gone/1", counts: ["copied": 600], lastKey: sorted[599], failures: [],
                leaseMs: 3_600_000))
        dead.close()

        let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
        #expect(outcome.status == .ok, "\(outcome.report.json())")
        let entry = try #require(outcome.report.jobs.first)
        let shards = try #require(entry.shards)
        #expect(shards.resumedRun == "sharded-earlier")
        #expect(shards.count == 3)
        #expect(shards.takenOver == 1, "the dead runner's range, though its lease had an hour to run")
        #expect(entry.counts["copied"] == keys.count)
        let mine = shards.runners.first { $0.runner != "gone/1" }
        #expect(mine?.counts["copied"] == keys.count - 600, "nothing the dead runner recorded was copied again")
        #expect(shards.runners.first { $0.runner == "gone/1" }?.counts == ["copied": 600])
        let copied = try await stored(directory)
        #expect(copied.count == keys.count)
    }

    /// A runner that named a failed key in a batch it recorded, then died: the report still names it, beside the
    /// counts, though the runner never finished its range.
    @Test func aDeadRunnersRecordedFailuresStayInTheReport() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory, count: 300)
        let compiled = try compile(
            pipeline(schema: PostgresServer.uniqueName("named"), shards: 2), in: directory, url: server.url)
        let job = try #require(compiled.spec.jobs.first)
        let plan = job.type + ": " + job.job.plan(paths: PlanPaths(directory: directory.path))
        let sorted = keys.sorted { StoreKey.bytesPrecede($0, $1) }
        let dead = try PostgresStateDatabase(try #require(compiled.spec.sharedState), pipeline: "sharded")
        try dead.startShardedJob(
            "copy", runID: "sharded-earlier", plan: plan, ranges: KeyRange.cut(at: [sorted[149]]),
            at: "2026-12-04T02:30:00Z")
        _ = try #require(try dead.leaseShard("copy", runner: "gone/1", leaseMs: 3_600_000))
        let failure = RunReport.Failure(
            key: sorted[0], provider: "to", code: ErrorCode.quotaExceeded.rawValue, message: "the disk was full")
        #expect(
            try dead.recordShardBatch(
                "copy", shard: 0, runner: "gone/1", counts: ["failed": 1], lastKey: sorted[0], failures: [failure],
                leaseMs: 3_600_000))
        dead.close()

        let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
        let entry = try #require(outcome.report.jobs.first)
        #expect(entry.counts["failed"] == 1 && entry.counts["copied"] == keys.count - 1)
        #expect(entry.failures.map(\.key) == [sorted[0]], "\(outcome.report.json())")
        #expect(entry.failures.first?.code == ErrorCode.quotaExceeded.rawValue)
        #expect(entry.status == .failed)
    }

    /// `clear` of one provider splits the same way: two runners, every key removed once, the counts summed.
    @Test func aShardedClearRemovesEveryKeyOnce() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory, count: 1200)
        let compiled = try compile(
            """
            version: 1
            name: emptied
            state: { postgresql: "${env:STATE_URL}", schema: \(PostgresServer.uniqueName("clear")) }
            providers:
              from: { type: directory, path: data/from }
            store:
              providers: [from]
            jobs:
              - { type: clear, name: empty, provider: from, confirm: true, shards: 4 }
            """, in: directory, url: server.url)
        let outcomes = try await joinedRuns(of: compiled, runners: 2)
        let report = try #require(outcomes.first { $0.joined == nil }?.report)
        #expect(report.status == .ok, "\(report.json())")
        #expect(report.jobs.first?.counts == ["removed": keys.count, "failed": 0, "queued": 0])
        #expect(report.jobs.first?.shards?.count == 4)
        let left = try DirectoryProvider(root: directory.file("data/from"))
        #expect(try await left.listKeys(after: nil, limit: 10).keys.isEmpty)
        await left.close()
    }

    /// A file whose state is a directory cannot split a job: no runner could share it.
    @Test func shardsNeedTheStateInPostgreSQL() throws {
        let directory = try TemporaryDirectory()
        let source = """
            version: 1
            name: sharded
            providers:
              from: { type: memory }
              to: { type: memory }
            store:
              providers: [to]
            jobs:
              - { type: migrate, from: from, to: to, shards: 4 }
            """
        #expect {
            _ = try PipelineLoader.load(
                source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry)
        } throws: { error in
            "\(error)".contains("p.yaml:9:5: error: job `1-migrate` is split into shards")
        }
    }
}

/// `check` split into ranges gives what the same check run whole gives: the counts, the status and, range by range in
/// key order, the same key lists.
@Suite(.timeLimit(.minutes(10))) struct ShardedCheckTests {
    private func compile(schema: String, shards: Int, in directory: TemporaryDirectory, url: String) throws
        -> CompiledPipeline
    {
        let environment = ["STATE_URL": url]
        let source = """
            version: 1
            name: compared
            state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
            providers:
              from: { type: directory, path: data/from }
              to: { type: sqlite, path: data/to.db, create: true }
            store:
              providers: [to]
            jobs:
              - { type: check, name: compare, from: from, to: to, shards: \(shards) }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    @Test(arguments: [1, 2] as [UInt64])
    func aShardedCheckFindsWhatACheckRunWholeFinds(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        // Keys on both sides, equal or not, only on one side or the other, awkward names among them.
        let keys = (0..<1500).map { String(format: "k%05d", $0) } + ["é-accent", "日本", "z/🌍", "a b"]
        var source: [KeyValue] = []
        var destination: [KeyValue] = []
        for key in keys {
            switch Int.random(in: 0..<10, using: &random) {
            case 0: source.append(KeyValue(key, "only in from"))
            case 1: destination.append(KeyValue(key, "only in to"))
            case 2:
                source.append(KeyValue(key, "one"))
                destination.append(KeyValue(key, "other"))
            default:
                source.append(KeyValue(key, "same \(key)"))
                destination.append(KeyValue(key, "same \(key)"))
            }
        }
        let from = try DirectoryProvider(root: directory.file("data/from"))
        _ = try await from.set(source)
        await from.close()
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        let to = try SQLiteProvider(path: directory.file("data/to.db"))
        _ = try await to.set(destination)
        await to.close()

        let whole = try await PipelineRunner(
            try compile(schema: PostgresServer.uniqueName("whole"), shards: 1, in: directory, url: server.url),
            options: RunOptions()
        ).run()
        let sharded = try compile(schema: PostgresServer.uniqueName("check"), shards: 6, in: directory, url: server.url)
        let outcomes = try await joinedRuns(of: sharded, runners: 3)
        let split = try #require(outcomes.first { $0.joined == nil })
        let (expected, got) = (try #require(whole.report.jobs.first), try #require(split.report.jobs.first))
        #expect(expected.status == .failed, "differences fail a check")
        #expect(got.status == expected.status)
        #expect(got.counts == expected.counts)
        #expect(got.keyLists == expected.keyLists, "the first 100 of each kind, in key order")
        #expect(got.shards?.count == 6)
        #expect(got.counts.values.reduce(0, +) == keys.count, "every key counted once")
    }
}

/// `mirror` split into ranges leaves the destination as the same mirror run whole does and reports the same: the
/// ranges set the keys only `to` holds aside, and the runner that started the run judges them against `maxDeletes`
/// as a whole before removing them.
@Suite(.timeLimit(.minutes(10))) struct ShardedMirrorTests {
    private func compile(
        schema: String, shards: Int, maxDeletes: String, data: String, in directory: TemporaryDirectory, url: String
    ) throws -> CompiledPipeline {
        let environment = ["STATE_URL": url]
        let source = """
            version: 1
            name: mirrored
            state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
            providers:
              from: { type: directory, path: \(data)/from }
              to: { type: sqlite, path: \(data)/to.db }
            store:
              providers: [to]
            jobs:
              - { type: mirror, name: follow, from: from, to: to, maxDeletes: "\(maxDeletes)", shards: \(shards) }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    /// The same keys and values in `data/from` and `data/to.db` under each of `names`.
    private func seed(_ directory: TemporaryDirectory, names: [String], seed: UInt64) async throws -> Int {
        var random = SeededRandom(seed: seed)
        var source: [KeyValue] = []
        var destination: [KeyValue] = []
        let keys = (0..<1200).map { String(format: "k%05d", $0) } + ["é-accent", "日本", "z/🌍", "a b"]
        for key in keys {
            switch Int.random(in: 0..<10, using: &random) {
            case 0: source.append(KeyValue(key, "new"))
            case 1: destination.append(KeyValue(key, "stale"))
            case 2:
                source.append(KeyValue(key, "one"))
                destination.append(KeyValue(key, "other"))
            default:
                source.append(KeyValue(key, "same \(key)"))
                destination.append(KeyValue(key, "same \(key)"))
            }
        }
        for name in names {
            let from = try DirectoryProvider(root: directory.file("\(name)/from"))
            _ = try await from.set(source)
            await from.close()
            let to = try SQLiteProvider(path: directory.file("\(name)/to.db"))
            _ = try await to.set(destination)
            await to.close()
        }
        return keys.count
    }

    private func held(_ path: String) async throws -> [String: String] {
        let provider = try SQLiteProvider(path: path)
        defer { Task { await provider.close() } }
        let keys = try await provider.listKeys(after: nil, limit: 10_000).keys
        var all: [String: String] = [:]
        for (key, value) in zip(keys, try await provider.get(keys)) { all[key] = try value.get() }
        return all
    }

    @Test(arguments: [(1, "50%"), (2, "5")] as [(UInt64, String)])
    func aShardedMirrorDoesWhatAMirrorRunWholeDoes(seed: UInt64, maxDeletes: String) async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        _ = try await self.seed(directory, names: ["whole", "split"], seed: seed)
        let whole = try await PipelineRunner(
            try compile(
                schema: PostgresServer.uniqueName("mwhole"), shards: 1, maxDeletes: maxDeletes, data: "whole",
                in: directory, url: server.url),
            options: RunOptions()
        ).run()
        let sharded = try compile(
            schema: PostgresServer.uniqueName("msplit"), shards: 5, maxDeletes: maxDeletes, data: "split",
            in: directory, url: server.url)
        let outcomes = try await joinedRuns(of: sharded, runners: 3)
        let split = try #require(outcomes.first { $0.joined == nil })
        let (expected, got) = (try #require(whole.report.jobs.first), try #require(split.report.jobs.first))
        #expect(got.status == expected.status, "\(split.report.json())")
        #expect(got.counts == expected.counts)
        #expect(got.keyLists == expected.keyLists)
        #expect(got.shards?.count == 5)
        #expect(got.shards?.runners.allSatisfy { $0.counts["destinationKeys"] == nil } == true)
        if maxDeletes == "5" {
            #expect(got.status == .failed && (got.counts["heldBack"] ?? 0) > 5, "too many deletions: none made")
        } else {
            #expect(got.status == .ok && (got.counts["deleted"] ?? 0) > 0)
        }
        #expect(try await held(directory.file("split/to.db")) == held(directory.file("whole/to.db")))
    }
}

/// `sync` split into ranges does what the same sync run whole does, over two runs (the first builds the snapshot, the
/// second propagates deletions, repairs edits and meets conflicts): the same contents on every provider, the same
/// counts, deletions and conflicts in the report, the same refusal when `maxDeletes` is exceeded.
@Suite(.timeLimit(.minutes(10))) struct ShardedSyncTests {
    private func compile(
        schema: String, shards: Int, maxDeletes: String, data: String, in directory: TemporaryDirectory, url: String
    ) throws -> CompiledPipeline {
        let environment = ["STATE_URL": url]
        let source = """
            version: 1
            name: synced
            state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
            providers:
              left: { type: directory, path: \(data)/left, create: true }
              right: { type: sqlite, path: \(data)/right.db, create: true }
            store:
              providers: [left, right]
            jobs:
              - { type: sync, name: both, maxDeletes: "\(maxDeletes)", shards: \(shards) }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    /// Applies the same writes to both copies (`whole`, `split`) of one side.
    private func apply(_ directory: TemporaryDirectory, left: [KeyValue], right: [KeyValue], removeLeft: [String])
        async throws
    {
        for name in ["whole", "split"] {
            let leftSide = try DirectoryProvider(root: directory.file("\(name)/left"))
            if !left.isEmpty { _ = try await leftSide.set(left) }
            if !removeLeft.isEmpty { _ = try await leftSide.remove(removeLeft) }
            await leftSide.close()
            let rightSide = try SQLiteProvider(path: directory.file("\(name)/right.db"))
            if !right.isEmpty { _ = try await rightSide.set(right) }
            await rightSide.close()
        }
    }

    private func contents(_ directory: TemporaryDirectory, _ name: String) async throws -> [String: String] {
        var all: [String: String] = [:]
        let left = try DirectoryProvider(root: directory.file("\(name)/left"))
        let keys = try await left.listKeys(after: nil, limit: 10_000).keys
        for (key, value) in zip(keys, try await left.get(keys)) { all["left/" + key] = try value.get() }
        await left.close()
        let right = try SQLiteProvider(path: directory.file("\(name)/right.db"))
        let rightKeys = try await right.listKeys(after: nil, limit: 10_000).keys
        for (key, value) in zip(rightKeys, try await right.get(rightKeys)) { all["right/" + key] = try value.get() }
        await right.close()
        return all
    }

    @Test(arguments: [(7, "50%"), (8, "3")] as [(UInt64, String)])
    func aShardedSyncDoesWhatASyncRunWholeDoes(seed: UInt64, maxDeletes: String) async throws {
        var random = SeededRandom(seed: seed)
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        for name in ["whole", "split"] {
            try FileManager.default.createDirectory(
                atPath: directory.file(name), withIntermediateDirectories: true)
        }
        let keys = (0..<900).map { String(format: "k%04d", $0) } + ["é-accent", "日本", "z/🌍", "a b"]
        var left: [KeyValue] = []
        var right: [KeyValue] = []
        for key in keys {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: left.append(KeyValue(key, "left \(key)"))
            case 1: right.append(KeyValue(key, "right \(key)"))
            default:
                left.append(KeyValue(key, "both \(key)"))
                right.append(KeyValue(key, "both \(key)"))
            }
        }
        try await apply(directory, left: left, right: right, removeLeft: [])
        let whole = try compile(
            schema: PostgresServer.uniqueName("swhole"), shards: 1, maxDeletes: maxDeletes, data: "whole",
            in: directory, url: server.url)
        let split = try compile(
            schema: PostgresServer.uniqueName("ssplit"), shards: 4, maxDeletes: maxDeletes, data: "split",
            in: directory, url: server.url)
        func runBoth() async throws -> (RunReport.Job, RunReport.Job) {
            let one = try await PipelineRunner(whole, options: RunOptions()).run()
            let outcomes = try await joinedRuns(of: split, runners: 3)
            let starter = try #require(outcomes.first { $0.joined == nil })
            return (try #require(one.report.jobs.first), try #require(starter.report.jobs.first))
        }

        for round in 0..<2 {
            let (expected, got) = try await runBoth()
            #expect(got.status == expected.status, "round \(round): \(got)")
            #expect(got.counts == expected.counts, "round \(round)")
            #expect(got.sync?.deletions == expected.sync?.deletions, "round \(round)")
            #expect(got.sync?.conflicts == expected.sync?.conflicts, "round \(round)")
            #expect(got.sync?.firstRun == expected.sync?.firstRun, "round \(round)")
            #expect(got.error?.code == expected.error?.code, "round \(round)")
            #expect(got.shards?.count == 4)
            #expect(try await contents(directory, "split") == contents(directory, "whole"), "round \(round)")
            if round == 1 {
                // The second round met what the test made: conflicts, and deletions made or refused.
                #expect((expected.counts["conflicts"] ?? 0) > 0)
                if maxDeletes == "3" {
                    #expect(expected.error?.code == ErrorCode.tooManyDeletes.rawValue)
                } else {
                    #expect(expected.counts["deleted"] == 12 && expected.sync?.deletions.count == 12)
                }
            }
            guard round == 0 else { break }
            // Between the runs: deletions on the left, edits on the right, the same key edited on both sides.
            let synced = keys.sorted()
            let removed = Array(synced.shuffled(using: &random).prefix(12))
            let edited = synced.filter { !removed.contains($0) }.shuffled(using: &random).prefix(30)
            let both = Array(edited.prefix(5))
            try await apply(
                directory, left: both.map { KeyValue($0, "left edit \($0)") },
                right: edited.map { KeyValue($0, "right edit \($0)") }, removeLeft: removed)
        }
    }
}
