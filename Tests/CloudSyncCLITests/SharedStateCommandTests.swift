import CloudSync
import CloudSyncHTTP
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// `cloudsync` with a pipeline whose state is in PostgreSQL: a killed run's lock, and the commands that read the
/// state (`history`, `outbox list`, `plan`).
@Suite(.timeLimit(.minutes(5))) struct SharedStateCommandTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    private func environment(_ url: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["STATE_URL"] = url
        return environment
    }

    /// A pipeline copying one key to a bucket at `endpoint`, its state in `schema`.
    private func write(_ name: String, schema: String, endpoint: String) throws -> String {
        let file = directory.file(name + ".yaml")
        try """
        version: 1
        name: \(name)
        state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
        providers:
          seed: { type: memory, items: { k: v } }
          bucket: { type: s3, bucket: b, endpoint: "\(endpoint)", accessKeyId: test, secretAccessKey: test-secret }
        store:
          providers: [bucket]
        jobs:
          - { type: migrate, from: seed, to: bucket }
        """.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// A run killed while it waits on its provider leaves no lock behind: the server ends its session, the lock goes
    /// with it, and the next run proceeds, with no lock file or lease to go stale.
    @Test func aRunKilledMidRunReleasesItsLockAtOnce() async throws {
        let server = try await PostgresServer.shared()
        let held = Mutex(true)
        let bucket = try LoopbackHTTPServer()
        defer { bucket.stop() }
        for method in ["GET", "PUT", "HEAD", "DELETE", "POST"] {
            bucket.route(try HTTPRoutePattern(parsing: "\(method) /{path...}")) { request in
                // Held until the test lets go: the run is mid-run, holding its lock, when it is killed.
                while held.withLock({ $0 }) { usleep(10_000) }
                return request.method == "GET"
                    ? .text(
                        200,
                        "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
                        headers: ["Content-Type": "application/xml"])
                    : .text(200, "", headers: ["ETag": "\"0\""])
            }
        }
        let schema = PostgresServer.uniqueName("killed")
        let file = try write("killed", schema: schema, endpoint: bucket.url("").absoluteString)
        let first = try RunningProcess(executable, ["run", file, "--quiet"], environment: environment(server.url))
        try await waitUntil { !bucket.requestLog.isEmpty }
        first.signal(SIGKILL)
        #expect(await first.exited().status == SIGKILL)
        held.withLock { $0 = false }

        let watcher = try await PostgresConnection.connect(server.url)
        try await waitUntil(asking: {
            try await watcher.execute(
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted"
            ).value("n") == .integer(0)
        })
        await watcher.close()
        let second = try await ProcessRunner.run(
            executable, ["run", file, "--quiet", "--report", "-"], environment: environment(server.url))
        #expect(second.status == 0, "\(second.standardError)")
    }

    @Test func historyOutboxAndPlanReadTheStateInPostgreSQLAndNeverShowTheURL() async throws {
        let server = try await PostgresServer.shared()
        let schema = PostgresServer.uniqueName("cli")
        // A bucket nobody answers on: the write is queued in the outbox.
        let file = try write("cli", schema: schema, endpoint: "http://127.0.0.1:1")
        let env = environment(server.url)
        let run = try await ProcessRunner.run(executable, ["run", file, "--report", "-"], environment: env)
        #expect(!run.standardOutput.contains(server.password) && !run.standardError.contains(server.password))
        // A second run finds the schema made: the server's notices about it are not printed.
        let again = try await ProcessRunner.run(executable, ["run", file, "--report", "-"], environment: env)
        #expect(!again.standardError.contains("NOTICE"), "\(again.standardError)")
        let history = try await ProcessRunner.run(executable, ["history", file, "--json"], environment: env)
        #expect(history.status == 0, "\(history.standardError)")
        let runs = try JSONSerialization.jsonObject(with: Data(history.standardOutput.utf8)) as? [[String: Any]]
        #expect(runs?.count == 2)
        #expect(runs?.first?["report"] == nil, "the report went to standard output")
        let plan = try await ProcessRunner.run(executable, ["plan", file], environment: env)
        #expect(plan.standardOutput.contains("state in PostgreSQL 127.0.0.1:\(server.port)/postgres, schema \(schema)"))
        #expect(!plan.standardOutput.contains(server.password))
        let outbox = try await ProcessRunner.run(executable, ["outbox", "list", file, "--json"], environment: env)
        #expect(outbox.status == 0, "\(outbox.standardError)")
        #expect((try JSONSerialization.jsonObject(with: Data(outbox.standardOutput.utf8)) as? [Any])?.isEmpty == true)

        // --join needs a state runners share.
        let plain = directory.file("plain.yaml")
        try "version: 1\nname: plain\nproviders:\n  m: { type: memory }\nstore:\n  providers: [m]\n".write(
            toFile: plain, atomically: true, encoding: .utf8)
        let join = try await ProcessRunner.run(executable, ["run", plain, "--join"], environment: env)
        #expect(join.status == 64)
        #expect(join.standardError.contains("--join needs the pipeline's state in PostgreSQL"))
    }

    /// `--join` with no run under way exits 0 saying so, starting nothing; its wait and the run's name are checked
    /// before anything is opened.
    @Test func joiningWithNoRunUnderWayDoesNothingAndSaysSo() async throws {
        let server = try await PostgresServer.shared()
        let file = try write("lonely", schema: PostgresServer.uniqueName("lonely"), endpoint: "http://127.0.0.1:9")
        let env = environment(server.url)
        let join = try await ProcessRunner.run(
            executable, ["run", file, "--join", "--run-id", "n-1"], environment: env)
        #expect(join.status == 0, "\(join.standardError)")
        #expect(join.standardError.contains("nothing to join: no run n-1 of lonely is under way"))
        #expect(join.standardOutput.isEmpty, "a joiner writes no report")
        let history = try await ProcessRunner.run(executable, ["history", file, "--json"], environment: env)
        let runs = try JSONSerialization.jsonObject(with: Data(history.standardOutput.utf8)) as? [Any]
        #expect(runs?.isEmpty == true, "\(history.standardOutput)")
        for (arguments, message) in [
            (["--join", "--join-wait", "5x"], "--join-wait wants a duration"),
            (["--join-wait", "5"], "--join-wait is how long --join waits for a run to start; add --join"),
            (["--run-id", "two words"], "--run-id wants 1 to 200 printable characters without spaces"),
        ] {
            let refused = try await ProcessRunner.run(executable, ["run", file] + arguments, environment: env)
            #expect(refused.status == 64, "\(arguments)")
            #expect(refused.standardError.contains(message), "\(refused.standardError)")
        }
    }
}
