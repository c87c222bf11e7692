import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// Three `cloudsync serve` processes, as on three hosts, serve one pipeline every 2 s with its state in PostgreSQL for
/// 30 s, and one of them is SIGKILLed halfway: each slot runs once across them (the slot claimed in the database), no
/// two runs overlap, and no slot is missing but the one the killed process may have claimed.
///
/// A stress suite (`make test` runs those alone after the main suite): with 2 s slots, a machine loaded by the main
/// suite's tests would make runs late enough to be skipped, which is not what this test is about.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct ServeClusterStressTests {
    @Test func threeHostsRunEachSlotOnceAndOutliveOneKilled() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let server = try await PostgresServer.shared()
        let schema = PostgresServer.uniqueName("serve")
        try directory.fill("seed", count: 3)
        let file = directory.file("shared.yaml")
        try PipelineText.directoryCopy(
            name: "shared", source: "seed", destination: "out",
            state: "{ postgresql: \"${env:STATE_URL}\", schema: \(schema) }", schedule: "{ every: 2s }"
        ).write(toFile: file, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["STATE_URL"] = server.url

        var hosts: [(RunningProcess, URL)] = []
        for _ in 0..<3 {
            let process = try RunningProcess(
                executable, ["serve", file, "--listen", "127.0.0.1:0"], environment: environment,
                currentDirectory: directory.path)
            if let url = await process.servingURL() { hosts.append((process, url)) }
        }
        try #require(hosts.count == 3, "a serve process did not start")
        let started = Date()
        try await Task.sleep(for: .seconds(15))
        hosts[0].0.signal(SIGKILL)
        let killedAt = Date()
        try await Task.sleep(for: .seconds(15))
        let ended = Date()

        // Any surviving host shows every host's runs, each report among them.
        let transport = URLSessionTransport()
        defer { transport.close() }
        let answer = try await transport.send(
            HTTPRequest(method: .get, url: URL(string: "/api/runs?limit=100", relativeTo: hosts[2].1)!))
        let runs = try #require(
            (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["runs"] as? [[String: Any]])
        // No report file is written (shared state, no report.path): another host's report comes from the database.
        for run in runs {
            let id = try #require(run["id"] as? String)
            let report = try await transport.send(
                HTTPRequest(method: .get, url: URL(string: "/api/runs/" + id, relativeTo: hosts[2].1)!))
            #expect(report.status == 200, "the report of \(id) from another host")
            #expect((try? JSONSerialization.jsonObject(with: report.body) as? [String: Any])?["runId"] as? String == id)
        }
        // The hosts that lost a slot's claim never reached for the run lock: no slot was refused as locked.
        var claimedElsewhere = 0
        for (_, base) in hosts.dropFirst() {
            let status = try await transport.send(
                HTTPRequest(method: .get, url: URL(string: "/api/pipelines", relativeTo: base)!))
            let pipeline = try #require(
                ((try JSONSerialization.jsonObject(with: status.body) as? [String: Any])?["pipelines"]
                    as? [[String: Any]])?
                    .first)
            let skipped = pipeline["skippedSlots"] as? [String: Int] ?? [:]
            #expect(skipped["locked", default: 0] == 0, "\(skipped)")
            claimedElsewhere += skipped["claimedElsewhere", default: 0]
        }
        #expect(claimedElsewhere > 0)
        for (process, _) in hosts.dropFirst() {
            process.signal(SIGTERM)
            #expect(await process.exited().status == 0)
        }

        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let spans = runs.compactMap { run -> (start: Date, end: Date, status: String)? in
            guard let start = (run["startedAt"] as? String).flatMap(formatter.date),
                let end = (run["finishedAt"] as? String).flatMap(formatter.date)
            else { return nil }
            return (start, end, run["status"] as? String ?? "")
        }.filter { $0.start > started && $0.start < ended }.sorted { $0.start < $1.start }
        #expect(spans.allSatisfy { $0.status == "ok" }, "\(runs)")
        // Each run belongs to the 2 s slot it started in; no slot twice, no two runs overlapping.
        let slots = spans.map { Int64(($0.start.timeIntervalSince1970 * 1000).rounded(.down)) / 2000 }
        #expect(Set(slots).count == slots.count, "a slot ran twice: \(slots)")
        for (earlier, later) in zip(spans, spans.dropFirst()) {
            #expect(earlier.end <= later.start, "runs overlap: \(earlier) and \(later)")
        }
        // Every slot from the first to the last ran, but at most one (the killed host's, claimed and not run).
        let first = try #require(slots.first)
        let last = try #require(slots.last)
        let missing = Set(first...last).subtracting(slots)
        #expect(missing.count <= 1, "slots missing: \(missing.sorted()) of \(first)...\(last)")
        #expect(slots.count >= 12, "only \(slots.count) runs in 30 s of 2 s slots")
        // Both halves ran: the survivors went on after the kill.
        #expect(spans.contains { $0.start > killedAt.addingTimeInterval(4) })
    }
}
