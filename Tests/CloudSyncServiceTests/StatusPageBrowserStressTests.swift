import CloudSync
import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncService

/// The status page as a person's browser shows it.
///
/// Headless Chromium (Debian's `chromium`, which `make test` installs) loads `/` from a served pair of pipelines, one
/// healthy and one whose check finds differences, and the test reads the DOM Chromium rendered.
///
/// Run with the stress suites, alone (`make test` runs those after the main suite): a Chromium starting takes both
/// cores for a moment, which the main suite's emulator deadlines do not survive. Its only network is loopback: every other address goes to a proxy that does
/// not exist. A screenshot is kept in `.build/test-artifacts/status-page.png`.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct StatusPageBrowserStressTests {
    static let root = ServiceAPITests.root

    private static let healthy = PipelineText.directoryCopy(
        name: "healthy", source: "seed", destination: "out", state: "state/healthy")

    /// Its check finds every key missing on the other side: the run fails.
    private static let drifting = PipelineText.directoryCopy(
        name: "drifting", source: "seed", destination: "empty", state: "state/drifting",
        jobs: ["{ type: check, name: compare, from: from, to: to }"])

    /// Its mirror would delete the three keys only its destination has, more than its maxDeletes allows: held.
    private static let held = PipelineText.directoryCopy(
        name: "held", source: "seed", destination: "stale", state: "state/held",
        jobs: ["{ type: mirror, name: mirror, from: from, to: to, maxDeletes: 1 }"])

    /// What Chromium rendered of `url`, and a screenshot of it at `screenshot`.
    private func render(_ url: URL, screenshot: String? = nil) async throws -> String {
        let profile = try TemporaryDirectory()
        var arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--disable-extensions", "--user-data-dir=" + profile.path,
            // Loopback goes direct; anything else would go to a proxy nobody listens on.
            "--proxy-server=http://127.0.0.1:9",
        ]
        if let screenshot {
            arguments += ["--window-size=1280,1200", "--screenshot=" + screenshot]
        } else {
            arguments += ["--dump-dom"]
        }
        let result = try await ProcessRunner.run("/usr/bin/chromium", arguments + [url.absoluteString])
        #expect(result.status == 0, "chromium: \(result.standardError.suffix(2000))")
        return result.standardOutput
    }

    @Test func chromiumShowsEveryPipelineTheFailedRunAndTheChartsAndANewRunOnReload() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("seed", count: 4)
        try Self.healthy.write(toFile: directory.file("healthy.yaml"), atomically: true, encoding: .utf8)
        try Self.drifting.write(toFile: directory.file("drifting.yaml"), atomically: true, encoding: .utf8)
        try Self.held.write(toFile: directory.file("held.yaml"), atomically: true, encoding: .utf8)
        try directory.fill("stale", count: 3) { "old \($0)" }
        for index in 0..<3 {
            try FileManager.default.moveItem(
                atPath: directory.file("stale/k\(index)"), toPath: directory.file("stale/only-here-\(index)"))
        }
        let service = PipelineService(
            PipelineService.Configuration(
                paths: [directory.path], load: ServiceAPITests.Served.load, log: { _ in }))
        service.start()
        let server = try NetworkHTTPServer(
            options: NetworkHTTPServer.Options(), responder: ServiceAPI(service: service, token: nil))
        defer { server.stop() }

        #expect(service.requestRun("healthy") == .started)
        #expect(service.requestRun("drifting") == .started)
        #expect(service.requestRun("held") == .started)
        try await waitForRuns(service, ["healthy": 1, "drifting": 1, "held": 1])

        let dom = try await render(server.url("/"))
        #expect(dom.contains("<title>cloudsync serve</title>"), "\(dom.prefix(500))")
        #expect(dom.contains("data-pipeline=\"healthy\" data-status=\"ok\""), "\(dom)")
        #expect(dom.contains("data-pipeline=\"drifting\" data-status=\"failed\""), "\(dom)")
        let drifting = try #require(service.pipelines.first { $0.name == "drifting" }?.recent.last)
        #expect(
            dom.contains("data-run=\"\(drifting.runId)\" data-status=\"failed\""), "the failed run is not shown failed")
        // Why each failed, as a person reads it: the held one's code and message and how to approve it, the
        // drifting one's job and what its check found.
        #expect(dom.contains("data-error-code=\"ERR_TOO_MANY_DELETES\""), "\(dom)")
        #expect(dom.contains("data-held=\"mirror\""))
        #expect(dom.contains("maxDeletes"))
        #expect(dom.contains(#"{"force": true}"#) || dom.contains("{&quot;force&quot;: true}"))
        #expect(dom.contains("compare (check) ended failed"))
        #expect(dom.contains("missingOnDestination 4"), "the check's finding is not on the page")
        #expect(dom.components(separatedBy: "data-chart=\"duration\"").count == 4, "a duration chart per pipeline")
        #expect(dom.components(separatedBy: "data-chart=\"keys-moved\"").count == 4)
        #expect(dom.contains("<rect"), "the charts have no bars")

        let artifacts = Self.root + "/.build/test-artifacts"
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let screenshot = artifacts + "/status-page.png"
        try? FileManager.default.removeItem(atPath: screenshot)
        _ = try await render(server.url("/"), screenshot: screenshot)
        let size = (try? FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? Int) ?? 0
        #expect(size > 10_000, "the screenshot is missing or blank (\(size) bytes)")

        // Another run; the next load shows it.
        #expect(service.requestRun("healthy") == .started)
        try await waitForRuns(service, ["healthy": 2, "drifting": 1, "held": 1])
        let newest = try #require(service.pipelines.first { $0.name == "healthy" }?.recent.last)
        #expect(!dom.contains(newest.runId))
        #expect(try await render(server.url("/")).contains("data-run=\"\(newest.runId)\""))
        await service.stop()
    }

    private func waitForRuns(_ service: PipelineService, _ counts: [String: Int]) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let statuses = service.pipelines
            if counts.allSatisfy({ name, count in
                statuses.contains { $0.name == name && $0.running == nil && $0.recent.count >= count }
            }) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("runs \(counts) did not finish within 120 s")
    }
}
