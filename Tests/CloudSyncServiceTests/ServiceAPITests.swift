import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncService

/// The service's HTTP face on real pipelines: what a run asked for leaves in every endpoint, what bad requests and
/// missing tokens get, and a reload that breaks a file.
@Suite(.timeLimit(.minutes(5)))
struct ServiceAPITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// A directory with one pipeline file (`copy`: 100 keys from one directory to another, no schedule) and a service
    /// serving it.
    struct Served {
        let directory: TemporaryDirectory
        let service: PipelineService
        var file: String { directory.file("copy.yaml") }

        init() throws {
            directory = try TemporaryDirectory()
            try directory.fill("from", count: 100) { "value \($0)" }
            try Self.pipeline.write(toFile: directory.file("copy.yaml"), atomically: true, encoding: .utf8)
            service = PipelineService(
                PipelineService.Configuration(paths: [directory.path], load: Self.load, log: { _ in }))
            service.start()
        }

        static let pipeline = PipelineText.directoryCopy(
            name: "copy", source: "from", destination: "to", state: "state")

        static func load(_ path: String) -> Result<CompiledPipeline, PipelineError> {
            do throws(PipelineError) {
                let spec = try PipelineLoader.load(
                    path: path, registry: BuiltInProviders.registry, jobTypes: BuiltInJobs.registry, environment: [:])
                return .success(try PipelineCompiler.compile(spec, environment: [:]))
            } catch {
                return .failure(error)
            }
        }

        /// Waits until the pipeline has `count` runs in memory and none in progress.
        func waitForRuns(_ count: Int) async throws {
            let deadline = ContinuousClock.now + .seconds(240)
            while ContinuousClock.now < deadline {
                if let status = service.pipelines.first, status.running == nil, status.recent.count >= count { return }
                try await Task.sleep(for: .milliseconds(20))
            }
            Issue.record("no \(count) finished runs within 240 s")
        }
    }

    private func request(_ method: String, _ target: String, headers: HTTPHeaders = [:]) -> ReceivedRequest {
        let components = URLComponents(string: "http://localhost" + target)!
        return ReceivedRequest(
            method: method, path: components.percentEncodedPath, target: target,
            queryItems: components.queryItems ?? [], headers: headers)
    }

    private func json(_ response: HTTPResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    @Test func aRunAskedForShowsInEveryEndpoint() async throws {
        let served = try Served()
        defer { Task { await served.service.stop() } }
        let api = ServiceAPI(service: served.service, token: nil)

        let started = api.handle(request("POST", "/api/pipelines/copy/run"))
        #expect(started.status == 202)
        // The run takes the pipeline at once: a second request while it runs is refused, not queued.
        let again = api.handle(request("POST", "/api/pipelines/copy/run"))
        #expect(again.status == 409)
        #expect(try (json(again)["error"] as? [String: Any])?["code"] as? String == "ERR_BUSY")
        try await served.waitForRuns(1)

        let runs = api.handle(request("GET", "/api/runs?pipeline=copy&limit=5"))
        #expect(runs.status == 200)
        let lines = try #require(try json(runs)["runs"] as? [[String: Any]])
        #expect(lines.count == 1)
        let id = try #require(lines.first?["id"] as? String)
        #expect(lines.first?["status"] as? String == "ok")

        let report = api.handle(request("GET", "/api/runs/\(id)"))
        #expect(report.status == 200)
        let decoded = try JSONDecoder().decode(RunReport.self, from: report.body)
        #expect(decoded.runId == id)
        #expect(decoded.jobs.first?.counts["copied"] == 100)

        let pipelines = api.handle(request("GET", "/api/pipelines"))
        let first = try #require((try json(pipelines)["pipelines"] as? [[String: Any]])?.first)
        #expect((first["lastRun"] as? [String: Any])?["id"] as? String == id)
        #expect((first["runs"] as? [String: Int])?["ok"] == 1)

        let page = String(decoding: api.handle(request("GET", "/")).body, as: UTF8.self)
        #expect(page.contains("data-pipeline=\"copy\""))
        #expect(page.contains("data-run=\"\(id)\""))
        #expect(page.contains("data-chart=\"duration\""))
        #expect(!page.contains("<script"), "the page must read without JavaScript")

        let metrics = api.handle(request("GET", "/metrics"))
        let text = String(decoding: metrics.body, as: UTF8.self)
        #expect(text.contains("cloudsync_pipeline_runs_total{pipeline=\"copy\",status=\"ok\"} 1"))
        #expect(text.contains("cloudsync_pipeline_last_run_job_result{pipeline=\"copy\",job=\"copy\""))
        #expect(text.contains("cloudsync_provider_requests_total{pipeline=\"copy\",provider=\"from\"} "))
        try await promtoolAccepts(text)

        let readiness = api.handle(request("GET", "/readyz"))
        #expect(readiness.status == 200, "\(String(decoding: readiness.body, as: UTF8.self))")
        try await schemaAccepts([started, again, runs, pipelines, readiness])
    }

    @Test func badRequestsGetAJSONErrorWithA4xxStatus() async throws {
        let served = try Served()
        defer { Task { await served.service.stop() } }
        let server = try NetworkHTTPServer(
            options: NetworkHTTPServer.Options(), responder: ServiceAPI(service: served.service, token: nil))
        defer { server.stop() }
        let transport = URLSessionTransport()
        defer { transport.close() }
        let cases: [(String, String, Int)] = [
            ("GET", "/nowhere", 404), ("GET", "/api", 404), ("GET", "/api/pipelines/copy", 404),
            ("GET", "/api/runs/", 404), ("GET", "/api/runs/no-such-run", 404),
            ("GET", "/api/runs/..%2F..%2Fetc%2Fpasswd", 404), ("GET", "/api/runs?limit=0", 400),
            ("GET", "/api/runs?limit=1001", 400), ("GET", "/api/runs?limit=ten", 400),
            ("GET", "/api/runs?limit=99999999999999999999999", 400), ("GET", "/api/runs?pipeline=cpy", 404),
            ("POST", "/api/pipelines/nope/run", 404), ("POST", "/api/pipelines//run", 404),
            ("GET", "/api/pipelines/copy/run", 405), ("PUT", "/api/pipelines/copy/run", 405),
            ("DELETE", "/metrics", 405), ("POST", "/", 405), ("POST", "/healthz", 405),
            ("PATCH", "/api/runs", 405), ("GET", "/" + String(repeating: "a/", count: 2000), 404),
        ]
        var bodies: [HTTPResponse] = []
        for (method, target, status) in cases {
            let response = try await transport.send(
                HTTPRequest(method: HTTPMethod(rawValue: method), url: server.url(target)))
            #expect(response.status == status, "\(method) \(target)")
            let error = try #require(try json(response)["error"] as? [String: Any], "\(method) \(target)")
            #expect((error["code"] as? String)?.hasPrefix("ERR_") == true)
            #expect(error["status"] as? Int == status)
            if status == 405 { #expect(response.headers["Allow"] != nil) }
            bodies.append(response)
        }
        // Still answering after all of them.
        let health = try await transport.send(HTTPRequest(method: .get, url: server.url("/healthz")))
        #expect(health.status == 200)
        try await schemaAccepts(bodies)
    }

    @Test func theTokenIsWantedEverywhereButHealthzAndComparedWhole() throws {
        let served = try Served()
        defer { Task { await served.service.stop() } }
        let token = "a-long-enough-secret-42"
        let api = ServiceAPI(service: served.service, token: token)
        let refused = api.handle(request("GET", "/metrics"))
        #expect(refused.status == 401)
        #expect(refused.headers.values(for: "WWW-Authenticate").count == 2)
        for wrong in ["Bearer ", "Bearer a-long-enough-secret-4", "Bearer a-long-enough-secret-420", "Token " + token] {
            #expect(api.handle(request("GET", "/api/pipelines", headers: ["Authorization": wrong])).status == 401)
        }
        #expect(api.handle(request("POST", "/api/pipelines/copy/run")).status == 401)
        #expect(api.handle(request("GET", "/healthz")).status == 200)
        #expect(api.handle(request("GET", "/metrics", headers: ["Authorization": "Bearer " + token])).status == 200)
        let basic = "Basic " + Data("anyone:\(token)".utf8).base64EncodedString()
        #expect(api.handle(request("GET", "/", headers: ["Authorization": basic])).status == 200)
        let refusedBody = String(decoding: refused.body, as: UTF8.self)
        #expect(!refusedBody.contains(token))
    }

    @Test func aFileThatNoLongerLoadsKeepsItsVersionAndIsReported() throws {
        let served = try Served()
        defer { Task { await served.service.stop() } }
        let api = ServiceAPI(service: served.service, token: nil)
        try (Served.pipeline + "\n  - { type: migrate, name: broken, from: nowhere, to: to }\n").write(
            toFile: served.file, atomically: true, encoding: .utf8)
        let errors = served.service.reload()
        #expect(errors[served.file]?.contains("nowhere") == true, "\(errors)")
        let status = try #require(served.service.pipelines.first)
        #expect(status.name == "copy")
        #expect(status.loadError != nil)
        #expect(served.service.compiled(named: "copy")?.spec.jobs.count == 1, "the running version was replaced")
        let readiness = api.handle(request("GET", "/readyz"))
        #expect(readiness.status == 503)
        #expect(String(decoding: readiness.body, as: UTF8.self).contains("nowhere"))
        #expect(
            String(decoding: api.handle(request("GET", "/metrics")).body, as: UTF8.self).contains(
                "cloudsync_pipeline_config_error{pipeline=\"copy\"} 1"))

        try Served.pipeline.write(toFile: served.file, atomically: true, encoding: .utf8)
        #expect(served.service.reload().isEmpty)
        #expect(served.service.pipelines.first?.loadError == nil)
        #expect(api.handle(request("GET", "/readyz")).status == 200)
    }

    /// `promtool check metrics` (Debian's prometheus package, which `make test` installs) accepts `text`.
    private func promtoolAccepts(_ text: String) async throws {
        let directory = try TemporaryDirectory()
        try text.write(toFile: directory.file("metrics.txt"), atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(
            "/bin/sh", ["-c", "promtool check metrics < \"$0\"", directory.file("metrics.txt")])
        #expect(result.status == 0, "promtool: \(result.standardOutput)\(result.standardError)")
    }

    /// check-jsonschema accepts every body against `schemas/serve-api.schema.json`.
    private func schemaAccepts(_ responses: [HTTPResponse]) async throws {
        let directory = try TemporaryDirectory()
        var files: [String] = []
        for (index, response) in responses.enumerated() {
            let file = directory.file("body\(index).json")
            try response.body.write(to: URL(fileURLWithPath: file))
            files.append(file)
        }
        let result = try await ProcessRunner.run(
            Self.root + "/.build/pyenv/bin/check-jsonschema",
            ["--schemafile", Self.root + "/schemas/serve-api.schema.json"] + files)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
    }
}
