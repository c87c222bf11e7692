import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync serve`, end to end: the built binary serving a directory of pipelines, driven over HTTP and signals as
/// systemd and a person would.
///
/// Run with the stress suites, alone (`make test` runs those after the main suite): its servers and a 3,000-key
/// migration take both cores when the main suite starts, and the in-process emulators' 30 s deadlines then expired
/// in CI.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct ServeEndToEndStressTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(
            atPath: directory.file("pipelines"), withIntermediateDirectories: true)
        try directory.fill("seed", count: 3)
        try directory.fill("big", count: 3000) { "value \($0)" }
    }

    /// A pipeline copying `from` into its own directory, on `schedule` (none: only when asked).
    private func pipeline(_ name: String, from: String, schedule: String?, jobs: Int = 1) -> String {
        PipelineText.directoryCopy(
            name: name, source: "../\(from)", destination: "../out/\(name)", state: "../state/\(name)",
            schedule: schedule, jobs: (0..<jobs).map { "{ type: migrate, name: copy\($0), from: from, to: to }" })
    }

    private func write(_ name: String, _ text: String) throws {
        try text.write(toFile: directory.file("pipelines/\(name).yaml"), atomically: true, encoding: .utf8)
    }

    /// Starts `serve` on the pipelines directory and returns it with its base URL, read from its first line.
    private func start(_ extra: [String] = []) async throws -> (RunningProcess, URL) {
        let process = try RunningProcess(
            executable, ["serve", directory.file("pipelines"), "--listen", "127.0.0.1:0"] + extra)
        if let url = await process.servingURL() { return (process, url) }
        let result = await process.exited()
        throw ServeDidNotStart(status: result.status, errors: result.standardError)
    }

    struct ServeDidNotStart: Error {
        let status: Int32
        let errors: String
    }

    private func get(_ base: URL, _ path: String, method: HTTPMethod = .get) async throws -> HTTPResponse {
        let transport = URLSessionTransport()
        defer { transport.close() }
        return try await transport.send(HTTPRequest(method: method, url: URL(string: path, relativeTo: base)!))
    }

    private func object(_ response: HTTPResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    /// Runs of each pipeline in `/api/runs`, by name.
    private func runCounts(_ base: URL) async throws -> [String: Int] {
        let runs = try #require(try object(await get(base, "/api/runs?limit=200"))["runs"] as? [[String: Any]])
        var counts: [String: Int] = [:]
        for run in runs { counts[run["pipeline"] as? String ?? "", default: 0] += 1 }
        return counts
    }

    /// Polls every 100 ms until `done` holds, for at most `limit`.
    private func until(
        _ what: String, within limit: Duration = .seconds(60), _ done: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if try await done() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("not within \(limit): \(what)")
        throw CancellationError()
    }

    @Test func servesTwoSchedulesReloadsAndStopsAtABatchBoundary() async throws {
        try write("alpha", pipeline("alpha", from: "seed", schedule: "{ every: 2s }"))
        try write("beta", pipeline("beta", from: "seed", schedule: "{ every: 2s }"))
        try write("slow", pipeline("slow", from: "big", schedule: nil, jobs: 2))
        let (process, base) = try await start()

        // Both scheduled pipelines run, each at least twice.
        try await until("alpha and beta ran twice each") {
            let counts = try await runCounts(base)
            return counts["alpha", default: 0] >= 2 && counts["beta", default: 0] >= 2
        }
        #expect(try await get(base, "/readyz").status == 200)
        let metrics = try await get(base, "/metrics")
        let file = directory.file("metrics.txt")
        try metrics.body.write(to: URL(fileURLWithPath: file))
        let promtool = try await ProcessRunner.run("/bin/sh", ["-c", "promtool check metrics < \"$0\"", file])
        #expect(promtool.status == 0, "\(promtool.standardOutput)\(promtool.standardError)")

        // beta's file breaks; SIGHUP: the error is reported and the old beta keeps running.
        try write("beta", pipeline("beta", from: "seed", schedule: "{ every: 2s }") + "  - { type: nonsense }\n")
        process.signal(SIGHUP)
        try await until("beta's error in /api/pipelines") {
            let pipelines = try #require(try object(await get(base, "/api/pipelines"))["pipelines"] as? [[String: Any]])
            return pipelines.contains { $0["name"] as? String == "beta" && $0["error"] != nil }
        }
        let readiness = try await get(base, "/readyz")
        #expect(readiness.status == 503)
        #expect(String(decoding: readiness.body, as: UTF8.self).contains("nonsense"))
        let betaRuns = try await runCounts(base)["beta", default: 0]
        try await until("beta ran again on its old version") {
            try await runCounts(base)["beta", default: 0] > betaRuns
        }

        // A run asked for over the API, and SIGTERM while it runs: exit 0, its report says interrupted.
        #expect(try await get(base, "/api/pipelines/slow/run", method: .post).status == 202)
        let out = directory.file("out/slow")
        try await process.signal(SIGTERM, once: { RunningProcess.entries(in: out) >= 5 }, within: 60)
        let ended = await process.exited()
        #expect(ended.status == 0, "\(ended.standardError)")
        let reports = try FileManager.default.contentsOfDirectory(atPath: directory.file("state/slow/reports"))
            .filter { $0.hasPrefix("slow-") }
        #expect(reports.count == 1)
        let report = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: directory.file("state/slow/reports/" + reports[0]))))
                as? [String: Any])
        #expect(report["status"] as? String == "interrupted")

        // A file that does not load stops the next start, naming it; mended, the schedule resumes.
        let refused = try RunningProcess(executable, ["serve", directory.file("pipelines"), "--listen", "127.0.0.1:0"])
        let refusal = await refused.exited()
        #expect(refusal.status == 64)
        #expect(refusal.standardError.contains("beta.yaml"), "\(refusal.standardError)")
        try write("beta", pipeline("beta", from: "seed", schedule: "{ every: 2s }"))
        let restartedAt = Date()
        let (again, secondBase) = try await start()
        try await until("alpha ran after the restart") {
            let runs = try #require(
                try object(await get(secondBase, "/api/runs?pipeline=alpha&limit=1"))["runs"] as? [[String: Any]])
            guard let started = runs.first?["startedAt"] as? String,
                let date = ISO8601DateFormatter.withMilliseconds.date(from: started)
            else { return false }
            return date > restartedAt
        }
        again.signal(SIGTERM)
        #expect(await again.exited().status == 0)
    }

    @Test func offLoopbackItWantsAPrivateTokenFileAndATakenAddressIsSaid() async throws {
        try write("alpha", pipeline("alpha", from: "seed", schedule: nil))
        let pipelines = directory.file("pipelines")
        let open = try await ProcessRunner.run(executable, ["serve", pipelines, "--listen", "0.0.0.0:0"])
        #expect(open.status == 64)
        #expect(open.standardError.contains("--token-file"), "\(open.standardError)")
        let token = directory.file("token")
        try "a-secret-long-enough-to-use".write(toFile: token, atomically: true, encoding: .utf8)
        chmod(token, 0o644)
        let readable = try await ProcessRunner.run(
            executable, ["serve", pipelines, "--listen", "0.0.0.0:0", "--token-file", token])
        #expect(readable.status == 64)
        #expect(readable.standardError.contains("chmod 600"), "\(readable.standardError)")
        #expect(!readable.standardError.contains("a-secret"), "the token was printed")
        // An address already taken: 69, saying which.
        let taken = try LoopbackHTTPServer()
        defer { taken.stop() }
        let busy = try await ProcessRunner.run(executable, ["serve", pipelines, "--listen", "127.0.0.1:\(taken.port)"])
        #expect(busy.status == 69)
        #expect(busy.standardError.contains("127.0.0.1:\(taken.port)"), "\(busy.standardError)")
    }
}

extension ISO8601DateFormatter {
    fileprivate static var withMilliseconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
