import CloudSync
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// Four `cloudsync run --join` processes drain one PostgreSQL outbox of 4,000 queued writes (10,000 at full size) into
/// S3 (moto), through a proxy that fails requests: every write that can arrive arrives exactly once (a claim taken by
/// two runners would send it twice), the ones the proxy keeps refusing stay queued with their attempt counted, none is
/// lost, and the report names what each runner delivered.
///
/// A stress suite (`make test` runs those alone after the main suite): thousands of objects into moto take a minute or
/// more of both cores.
@Suite(
    .serialized, .timeLimit(.minutes(15)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct SharedOutboxDrainStressTests {
    /// Writes queued: 10,000 under `CLOUDSYNC_STRESS=full`.
    static let count = StressSize.pick(ci: 4_000, full: 10_000)

    /// The key of entry `number` (1-based), as the SQL that queues them spells it.
    static func key(_ number: Int) -> String { String(format: "item-%05d", number) }

    /// Every 10th key's first PUT is refused with a 503 the provider retries at once; every 500th key's PUTs are all
    /// refused, so its entry is rescheduled.
    static func refusesAlways(_ number: Int) -> Bool { number % 500 == 0 }
    static func refusesOnce(_ number: Int) -> Bool { number % 10 == 0 && !refusesAlways(number) }

    @Test func fourRunnersDrainOneOutboxAndDeliverEachEntryOnce() async throws {
        let directory = try TemporaryDirectory()
        let server = try await PostgresServer.shared()
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        defer { proxy.server.stop() }
        let schema = PostgresServer.uniqueName("drain")
        let prefix = "\(schema)/"
        let file = directory.file("drain.yaml")
        try """
        version: 1
        name: drain
        state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
        providers:
          bucket: { type: s3, bucket: cloudsync-tests, prefix: \(prefix), endpoint: "\(proxy.endpoint.absoluteString)" }
          empty: { type: directory, path: empty, create: true }
        store: { providers: [bucket] }
        jobs:
          - { type: migrate, name: nothing, from: empty, to: bucket }
        """.write(toFile: file, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment.merge([
            "STATE_URL": server.url, "AWS_ACCESS_KEY_ID": "AKIADRAIN", "AWS_SECRET_ACCESS_KEY": "drain-secret",
        ]) { $1 }
        let executable = try ProcessRunner.builtProduct("cloudsync")

        // A first run sets the schema up; then the queue is filled as that many failed writes would have left it.
        let first = try await ProcessRunner.run(
            executable, ["run", file, "--report", "-", "--quiet"], environment: environment,
            currentDirectory: directory.path)
        try #require(first.status == 0, "\(first.standardError)")
        let database = try await PostgresConnection.connect(server.url)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try await database.execute(
            "INSERT INTO \(schema).outbox (pipeline, id, key, provider, operation, value, attempts, next_attempt_at_ms, "
                + "enqueued_at_ms, last_error_code) SELECT 'drain', i, convert_to(k, 'UTF8'), 'bucket', 'set', "
                + "convert_to('queued ' || k, 'UTF8'), 1, 0, $1, 'ERR_OFFLINE' FROM generate_series(1, $2) AS i, "
                + "LATERAL (SELECT 'item-' || lpad(i::text, 5, '0') AS k) AS named",
            [.integer(now), .integer(Int64(Self.count))])

        let forwarded = Mutex<[String: Int]>([:])
        let refused = Mutex<Set<String>>([])
        proxy.intercept { request in
            guard request.method == "PUT", let name = request.path.split(separator: "/").last,
                let number = Int(name.dropFirst("item-".count))
            else { return nil }
            let key = String(name)
            let refuse =
                Self.refusesAlways(number) || (Self.refusesOnce(number) && refused.withLock { $0.insert(key).inserted })
            if refuse { return s3Error(503, "SlowDown", "Please reduce your request rate.") }
            forwarded.withLock { $0[key, default: 0] += 1 }
            return nil
        }
        // One runner starts the run, named for it; three join it by that name.
        let name = "drain-\(UUID().uuidString)"
        let runners = try (0..<4).map { index in
            try RunningProcess(
                executable,
                ["run", file, "--run-id", name, "--report", "-", "--quiet"]
                    + (index == 0 ? [] : ["--join", "--join-wait", "60"]), environment: environment,
                currentDirectory: directory.path)
        }
        var results: [ProcessResult] = []
        for runner in runners { results.append(await runner.exited()) }

        let stuck = (1...Self.count).filter(Self.refusesAlways)
        let arriving = Self.count - stuck.count
        let sent = forwarded.withLock { $0 }
        #expect(sent.count == arriving, "every write that could arrive arrived")
        #expect(sent.values.allSatisfy { $0 == 1 }, "none twice: \(sent.filter { $0.value > 1 }.prefix(5))")
        #expect(stuck.allSatisfy { sent[Self.key($0)] == nil })
        let reports = results.filter { !$0.standardOutput.isEmpty }
        try #require(reports.count == 1, "one runner wrote the report: \(results.map(\.standardError))")
        // Entries still queued at the end make the run `queued` (exit 3), not a failure.
        #expect(results.allSatisfy { $0.status == 0 || $0.status == 3 }, "\(results.map(\.standardError))")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(reports[0].standardOutput.utf8)) as? [String: Any])
        let outbox = try #require(report["outbox"] as? [String: Any])
        #expect(outbox["pendingBefore"] as? Int == Self.count)
        #expect(outbox["drained"] as? Int == arriving)
        #expect(outbox["pendingAfter"] as? Int == stuck.count)
        let byRunner = try #require(outbox["drainedBy"] as? [String: Int])
        #expect(byRunner.values.reduce(0, +) == arriving)
        #expect(byRunner.count >= 2, "the runners that joined took part: \(byRunner)")

        // The refused writes are still queued, one more attempt counted, none lost.
        let left = try await database.execute(
            "SELECT convert_from(key, 'UTF8'), attempts, last_error_code FROM \(schema).outbox "
                + "WHERE pipeline = 'drain' ORDER BY key")
        #expect(left.rows.map { $0[0].text ?? "" } == stuck.map(Self.key))
        #expect(
            left.rows.allSatisfy { $0[1].integer == 2 && $0[2].text == ErrorCode.rateLimited.rawValue },
            "attempted once more each: \(left.rows.prefix(3))")
        await database.close()

        // What arrived is the queued value, read from moto directly.
        let bucket = makeProvider(endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: prefix)
        let sample = [1, 2, 10, 11, Self.count / 2 - 1, Self.count - 1].map(Self.key)
        let values = try await bucket.get(sample)
        #expect(zip(sample, values).allSatisfy { key, value in (try? value.get()) == "queued \(key)" })
        await bucket.close()
    }
}
