import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync serve` under 1,000 requests a second for 10 s against `/metrics` and `/` (scripts/http_load.py, eight
/// kept-alive connections): every request answered 200, and the pipeline beside them keeps its 2 s schedule — every
/// slot of the window runs, each within a second of its slot.
///
/// A stress suite (`make test` runs those alone after the main suite): the load takes both cores for 10 s.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct ServeLoadStressTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func athousandRequestsASecondLeaveRunsOnSchedule() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        try directory.fill("seed", count: 3)
        let file = directory.file("steady.yaml")
        try PipelineText.directoryCopy(
            name: "steady", source: "seed", destination: "out", schedule: "{ every: 2s }"
        ).write(toFile: file, atomically: true, encoding: .utf8)
        let process = try RunningProcess(executable, ["serve", file, "--listen", "127.0.0.1:0"])
        let url = try #require(await process.servingURL()?.absoluteString, "serve did not start")

        let started = Date()
        let load = try await ProcessRunner.run(
            Self.root + "/.build/pyenv/bin/python3",
            [
                Self.root + "/scripts/http_load.py", url, "--rate", "1000", "--seconds", "10", "--path", "/metrics",
                "--path", "/",
            ])
        let ended = Date()
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(load.standardOutput.utf8)) as? [String: Any],
            "\(load.standardOutput)\(load.standardError)")
        #expect(figures["errors"] as? Int == 0, "\(figures)")
        #expect((figures["statuses"] as? [String: Int])?.keys.sorted() == ["200"], "\(figures)")
        #expect((figures["perSecond"] as? Double ?? 0) >= 800, "the server kept up with \(figures)")

        let transport = URLSessionTransport()
        defer { transport.close() }
        let answer = try await transport.send(
            HTTPRequest(method: .get, url: URL(string: url + "api/runs?limit=100")!))
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)
        let runs = try #require(
            (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["runs"] as? [[String: Any]])
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let starts = runs.compactMap { ($0["startedAt"] as? String).flatMap(formatter.date) }
        // The slots wholly inside the load: each ran, within a second of its slot.
        let firstSlot = (started.timeIntervalSince1970 / 2).rounded(.up) * 2
        let lastSlot = (ended.timeIntervalSince1970 / 2).rounded(.down) * 2 - 2
        for slot in stride(from: firstSlot, through: lastSlot, by: 2) {
            let lag = starts.map { $0.timeIntervalSince1970 - slot }.filter { $0 >= 0 && $0 < 2 }.min()
            #expect(lag != nil, "the slot at \(Date(timeIntervalSince1970: slot)) did not run under load")
            if let lag { #expect(lag < 1, "the slot at \(Date(timeIntervalSince1970: slot)) started \(lag) s late") }
        }
        #expect(lastSlot - firstSlot >= 6, "the window held too few slots")
    }
}
