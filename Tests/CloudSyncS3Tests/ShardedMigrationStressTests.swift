import CloudSync
import CloudSyncLocal
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

/// Four `cloudsync run --join` processes share one migration of 8,000 values from a directory to S3 (moto, behind
/// a proxy counting its requests), their state in PostgreSQL: no key is written twice, and with one of them killed
/// mid-run, another finishes its range.
///
/// A stress suite (`make test` runs those alone after the main suite): 8,000 objects into moto take over a minute of both
/// cores, which would starve the timing-sensitive tests running beside them.
@Suite(
    .serialized, .timeLimit(.minutes(15)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct ShardedMigrationStressTests {
    static let count = 8_000

    /// The source: `count` values of 1 KB each in a directory, each naming `round` (a new round changes them all).
    private func seed(_ directory: TemporaryDirectory, count: Int = Self.count, round: Int = 1) async throws
        -> [String]
    {
        let keys = (0..<count).map { String(format: "item-%05d", $0) }
        let source = try DirectoryProvider(root: directory.file("from"))
        let filler = String(repeating: "x", count: 1000)
        for start in stride(from: 0, to: keys.count, by: 1000) {
            let chunk = keys[start..<min(start + 1000, keys.count)]
            _ = try await source.set(
                chunk.map { KeyValue($0, "\($0):\(round):" + filler.prefix(1012 - $0.utf8.count)) })
        }
        await source.close()
        return keys
    }

    private struct Run {
        let schema: String
        let prefix: String
        let file: String
        let environment: [String: String]
        let proxy: S3Proxy
    }

    private func prepare(_ directory: TemporaryDirectory, label: String, shards: Int) async throws -> Run {
        let server = try await PostgresServer.shared()
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let schema = PostgresServer.uniqueName(label)
        let prefix = "\(schema)/"
        let file = directory.file("\(label).yaml")
        try """
        version: 1
        name: \(label)
        state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
        providers:
          from: { type: directory, path: from }
          bucket: { type: s3, bucket: cloudsync-tests, prefix: \(prefix), endpoint: "\(proxy.endpoint.absoluteString)" }
        store: { providers: [from] }
        jobs:
          - { type: migrate, name: upload, from: from, to: bucket, shards: \(shards) }
        """.write(toFile: file, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment.merge([
            "STATE_URL": server.url, "AWS_ACCESS_KEY_ID": "AKIASHARDS", "AWS_SECRET_ACCESS_KEY": "shard-secret",
        ]) { $1 }
        return Run(schema: schema, prefix: prefix, file: file, environment: environment, proxy: proxy)
    }

    /// Starts four runners at once: one starts the run, named for it, and three join it by that name.
    private func start(_ run: Run, directory: TemporaryDirectory) throws -> [RunningProcess] {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let name = "sharded-\(UUID().uuidString)"
        return try (0..<4).map { index in
            try RunningProcess(
                executable,
                ["run", run.file, "--run-id", name, "--report", "-", "--quiet"]
                    + (index == 0 ? [] : ["--join", "--join-wait", "60"]), environment: run.environment,
                currentDirectory: directory.path)
        }
    }

    /// The one report among the runners' outputs: the starter's, on standard output.
    private func report(of results: [ProcessResult]) throws -> [String: Any] {
        let reports = results.filter { !$0.standardOutput.isEmpty }
        try #require(reports.count == 1, "one runner wrote the report: \(results.map(\.standardError))")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(reports[0].standardOutput.utf8)) as? [String: Any])
    }

    /// Objects under the run's prefix, listed from moto directly (not through the proxy).
    private func objects(under prefix: String) async throws -> Int {
        let bucket = makeProvider(endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: prefix)
        var count = 0
        var cursor: String?
        repeat {
            let page = try await bucket.listKeys(after: cursor, limit: 1000)
            count += page.keys.count
            cursor = page.nextCursor
        } while cursor != nil
        await bucket.close()
        return count
    }

    /// Finds and stops (SIGSTOP) a runner other than the starter whose range has keys left after its last recorded batch.
    ///
    /// The range is looked at again once the runner is stopped, so the runner cannot finish it between the look and the
    /// kill; a runner that did finish it meanwhile is let go on (SIGCONT) and another is looked for.
    private func stopAVictim(
        of run: Run, among processes: [RunningProcess], keys: [String], watcher: PostgresConnection
    ) async throws -> (process: RunningProcess, left: KeyRange) {
        let found = Protected<(process: RunningProcess, left: KeyRange)?>(nil)
        try await waitUntil(limit: .seconds(300)) { () async throws -> Bool in
            // Until the starter has made the schema, there is nothing to look at.
            let made = try await watcher.execute(
                "SELECT to_regclass($1) IS NOT NULL AS made", [.text("\(run.schema).sharded_jobs")])
            guard made.value("made") == .boolean(true) else { return false }
            let starter = try await watcher.execute(
                "SELECT pid FROM \(run.schema).run_locks WHERE pipeline = 'killed'"
            ).rows.first?[0].integer
            let busy = try await watcher.execute(
                "SELECT runner, shard, through_key, done_after FROM \(run.schema).shards "
                    + "WHERE pipeline = 'killed' AND NOT done AND runner IS NOT NULL AND done_after IS NOT NULL")
            for row in busy.rows {
                let runner = row[0].text ?? ""
                let text = { (value: PostgresValue) in value.bytes.map { String(decoding: $0, as: UTF8.self) } }
                let left = KeyRange(after: text(row[3]), through: text(row[2]))
                guard let pid = Int32(runner.split(separator: "/").last ?? ""), Int64(pid) != starter,
                    let process = processes.first(where: { $0.pid == pid }), keys.contains(where: left.contains)
                else { continue }
                process.signal(SIGSTOP)
                let still = try await watcher.execute(
                    "SELECT 1 FROM \(run.schema).shards WHERE pipeline = 'killed' AND shard = $1 AND runner = $2 "
                        + "AND NOT done", [row[1], .text(runner)])
                guard !still.rows.isEmpty else {
                    process.signal(SIGCONT)
                    continue
                }
                found.withLock { $0 = (process, left) }
                return true
            }
            return false
        }
        return try #require(found.withLock { $0 })
    }

    @Test func fourRunnersUploadEveryValueOnceAndTheCountsSumToTheKeys() async throws {
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory)
        let run = try await prepare(directory, label: "together", shards: 8)
        defer { run.proxy.server.stop() }
        var results: [ProcessResult] = []
        for process in try start(run, directory: directory) { results.append(await process.exited()) }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.standardError))")
        let report = try report(of: results)
        let job = try #require((report["jobs"] as? [[String: Any]])?.first)
        #expect((job["counts"] as? [String: Int])?["copied"] == keys.count)
        let shards = try #require(job["shards"] as? [String: Any])
        let runners = try #require(shards["runners"] as? [[String: Any]])
        #expect(runners.reduce(0) { $0 + (($1["counts"] as? [String: Int])?["copied"] ?? 0) } == keys.count)
        #expect(run.proxy.count("PUT") == keys.count, "no key was written twice")
        #expect(try await objects(under: run.prefix) == keys.count)
    }

    /// A scheduler's stragglers, round after round.
    ///
    /// Each round is a run named for it, one starter and three joiners at once, then two more as the starter ends (one
    /// joining the named run, one joining whatever is under way). Every value changes before each round (a migrate
    /// remembers what it copied, so an unchanged one would not be written again), and every round writes each key
    /// once; a late joiner starts nothing, writes nothing and exits 0.
    @Test func roundsOfAStarterThreeJoinersAndTwoLateJoinersWriteEachKeyOncePerRun() async throws {
        let directory = try TemporaryDirectory()
        // Fewer keys than the other tests, more runs: what is counted is how often each is written per run.
        let keys = try await seed(directory, count: 1_000)
        let run = try await prepare(directory, label: "rounds", shards: 4)
        defer { run.proxy.server.stop() }
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let rounds = 10
        for round in 1...rounds {
            if round > 1 { _ = try await seed(directory, count: keys.count, round: round) }
            let before = run.proxy.count("PUT")
            let name = "round-\(round)-\(UUID().uuidString)"
            func runner(_ extra: [String], quiet: Bool = true) throws -> RunningProcess {
                try RunningProcess(
                    executable, ["run", run.file, "--report", "-"] + (quiet ? ["--quiet"] : []) + extra,
                    environment: run.environment, currentDirectory: directory.path)
            }
            let starter = try runner(["--run-id", name])
            let joiners = try (0..<3).map { _ in try runner(["--run-id", name, "--join", "--join-wait", "60"]) }
            let started = await starter.exited()
            // Not quiet: what they say is checked.
            let late = [
                try runner(["--run-id", name, "--join", "--join-wait", "5"], quiet: false),
                try runner(["--join"], quiet: false),
            ]
            var results = [started]
            for process in joiners + late { results.append(await process.exited()) }
            #expect(results.allSatisfy { $0.status == 0 }, "round \(round): \(results.map(\.standardError))")
            let report = try report(of: results)
            let job = try #require((report["jobs"] as? [[String: Any]])?.first)
            #expect((job["counts"] as? [String: Int])?["copied"] == keys.count, "round \(round)")
            #expect(run.proxy.count("PUT") - before == keys.count, "round \(round): each key written once")
            for straggler in results.suffix(2) {
                #expect(straggler.standardOutput.isEmpty, "a late joiner reported a run of its own")
                #expect(
                    straggler.standardError.contains("already finished")
                        || straggler.standardError.contains("nothing to join"),
                    "round \(round): \(straggler.standardError)")
            }
        }
    }

    @Test func aRunnerKilledMidRunLeavesItsRangeToAnotherAndEveryValueArrives() async throws {
        let directory = try TemporaryDirectory()
        let keys = try await seed(directory)
        // Four ranges of about 2,000 keys: each is copied in batches of 1,000 (S3's batch limit), so a range whose
        // first batch is recorded still has a batch to copy, and the runner is caught in the middle of it.
        let run = try await prepare(directory, label: "killed", shards: 4)
        defer { run.proxy.server.stop() }
        let watcher = try await PostgresConnection.connect(try await PostgresServer.shared().url)
        let processes = try start(run, directory: directory)
        let victim = try await stopAVictim(of: run, among: processes, keys: keys, watcher: watcher)
        victim.process.signal(SIGKILL)
        var results: [ProcessResult] = []
        for process in processes { results.append(await process.exited()) }
        await watcher.close()
        #expect(results.filter { $0.status == SIGKILL }.count == 1)
        #expect(results.filter { $0.status == 0 }.count == 3, "\(results.map(\.standardError))")
        let report = try report(of: results)
        let job = try #require((report["jobs"] as? [[String: Any]])?.first)
        #expect(
            (job["counts"] as? [String: Int])?["copied"] == keys.count, "counted once each, the killed runner's too")
        let shards = try #require(job["shards"] as? [String: Any])
        #expect((shards["takenOver"] as? Int ?? 0) >= 1, "the report says a range was taken over")
        #expect(try await objects(under: run.prefix) == keys.count, "every object arrived")
        // Written twice: at most what the killed runner wrote of its range after its last recorded batch, which came
        // no earlier than the one the look saw.
        let left = keys.filter(victim.left.contains).count
        let puts = run.proxy.count("PUT")
        #expect(
            puts >= keys.count && puts - keys.count <= left,
            "\(puts) PUTs; the killed range had \(left) keys left after its last recorded batch")
    }
}
