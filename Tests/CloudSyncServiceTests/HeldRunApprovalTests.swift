import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncService

/// A run held by `maxDeletes`, as the API and the page tell it, and its approval over the API: refused without the
/// service's token or with a body that is not the JSON it takes, and when approved, one run that deletes.
@Suite(.timeLimit(.minutes(5)))
struct HeldRunApprovalTests {
    static let token = "a-long-enough-secret-for-approval"

    static func request(
        _ method: String, _ path: String, body: String = "", json: Bool = true, token: String? = Self.token
    )
        -> ReceivedRequest
    {
        var headers: HTTPHeaders = [:]
        if let token { headers["Authorization"] = "Bearer " + token }
        if json, !body.isEmpty { headers["Content-Type"] = "application/json" }
        return ReceivedRequest(method: method, path: path, headers: headers, body: Data(body.utf8))
    }

    static func object(_ response: HTTPResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    @Test func aHeldRunSaysWhyAndOneApprovalWithTheTokenRunsItOnce() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("from", count: 6) { "value \($0)" }
        try PipelineText.directoryCopy(
            name: "backup", source: "from", destination: "to", state: "state",
            jobs: ["{ type: mirror, name: mirror, from: from, to: to, maxDeletes: 2 }"]
        ).write(toFile: directory.file("backup.yaml"), atomically: true, encoding: .utf8)
        let service = PipelineService(
            PipelineService.Configuration(
                paths: [directory.path], load: ServiceAPITests.Served.load, log: { _ in }))
        service.start()
        defer { Task { await service.stop() } }
        let api = ServiceAPI(service: service, token: Self.token)
        let open = ServiceAPI(service: service, token: nil)

        #expect(api.handle(Self.request("POST", "/api/pipelines/backup/run")).status == 202)
        try await waitForRuns(service, 1)
        // The source loses every key: the mirror would delete 6, more than its maxDeletes of 2.
        for index in 0..<6 { try FileManager.default.removeItem(atPath: directory.file("from/k\(index)")) }
        #expect(api.handle(Self.request("POST", "/api/pipelines/backup/run")).status == 202)
        try await waitForRuns(service, 2)

        let pipelines = try Self.object(api.handle(Self.request("GET", "/api/pipelines")))
        let pipeline = try #require((pipelines["pipelines"] as? [[String: Any]])?.first)
        let held = try #require(pipeline["held"] as? [String: Any], "\(pipeline)")
        #expect(held["job"] as? String == "mirror")
        #expect((held["approve"] as? String)?.contains(#"{"force": true}"#) == true)
        let lastRun = try #require(pipeline["lastRun"] as? [String: Any])
        #expect((lastRun["error"] as? [String: Any])?["code"] as? String == "ERR_TOO_MANY_DELETES", "\(lastRun)")
        let failed = try #require((lastRun["failedJobs"] as? [[String: Any]])?.first)
        #expect(failed["job"] as? String == "mirror" && (failed["counts"] as? [String: Int])?["heldBack"] == 6)
        let page = String(decoding: api.handle(Self.request("GET", "/")).body, as: UTF8.self)
        #expect(page.contains("data-held=\"mirror\""))
        #expect(page.contains("ERR_TOO_MANY_DELETES"))
        #expect(page.contains("force"))

        // Refused approvals, none of which starts a run.
        let refusals: [(ReceivedRequest, ServiceAPI, Int)] = [
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": true}"#, token: nil), api, 401),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": true}"#), open, 403),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": true}"#, json: false), api, 415),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": 1}"#), api, 400),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": "true"}"#), api, 400),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"forse": true}"#), api, 400),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"[true]"#), api, 400),
            (Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": tru"#), api, 400),
        ]
        for (request, face, status) in refusals {
            let answer = face.handle(request)
            #expect(answer.status == status, "\(String(decoding: request.body, as: UTF8.self))")
            let error = try #require(try Self.object(answer)["error"] as? [String: Any])
            #expect((error["code"] as? String)?.hasPrefix("ERR_") == true)
        }
        #expect(service.pipelines.first?.recent.count == 2, "a refused approval started a run")
        #expect(FileManager.default.fileExists(atPath: directory.file("to/k0")))

        // The approval: one run, which deletes the six.
        let approved = api.handle(Self.request("POST", "/api/pipelines/backup/run", body: #"{"force": true}"#))
        #expect(approved.status == 202)
        #expect(try Self.object(approved)["force"] as? Bool == true)
        try await waitForRuns(service, 3)
        let status = try #require(service.pipelines.first)
        #expect(status.recent.count == 3)
        let forced = try #require(status.recent.last?.jobs.first)
        #expect(forced.counts["deleted"] == 6, "\(forced.counts)")
        #expect(status.recent.last?.status == .ok)
        #expect(!FileManager.default.fileExists(atPath: directory.file("to/k0")))
        let after = try Self.object(api.handle(Self.request("GET", "/api/pipelines")))
        #expect((after["pipelines"] as? [[String: Any]])?.first?["held"] == nil, "still held after the approval")
        // The next run is an ordinary one again: nothing left to delete, nothing forced.
        #expect(api.handle(Self.request("POST", "/api/pipelines/backup/run", body: "{}")).status == 202)
        try await waitForRuns(service, 4)
        #expect(service.pipelines.first?.recent.last?.status == .ok)
    }

    private func waitForRuns(_ service: PipelineService, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let status = service.pipelines.first, status.running == nil, status.recent.count >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("no \(count) finished runs within 120 s")
    }
}

/// What a web page open in a browser on the serving machine can make the browser send: a request under a name the
/// page's site points at 127.0.0.1 (DNS rebinding), and a cross-site POST.
@Suite struct BrowserForgeryTests {
    func request(_ method: String, _ path: String, _ headers: HTTPHeaders) -> ReceivedRequest {
        ReceivedRequest(method: method, path: path, headers: headers)
    }

    @Test func withoutATokenOnlyRequestsAddressedToThisMachineAreAnswered() throws {
        let directory = try TemporaryDirectory()
        let service = PipelineService(
            PipelineService.Configuration(paths: [directory.path], load: ServiceAPITests.Served.load, log: { _ in }))
        let api = ServiceAPI(service: service, token: nil)
        for host in ["127.0.0.1:8484", "localhost", "LOCALHOST:1", "[::1]:8484", "127.1.2.3", "[::1]"] {
            #expect(api.handle(request("GET", "/api/pipelines", ["Host": host])).status == 200, "\(host)")
        }
        for host in [
            "attacker.example", "attacker.example:8484", "127.0.0.1.attacker.example", "[::2]:8484", "0.0.0.0",
        ] {
            let answer = api.handle(request("GET", "/api/pipelines", ["Host": host]))
            #expect(answer.status == 403, "\(host)")
        }
        // The health check answers whatever the name: it tells nothing.
        #expect(api.handle(request("GET", "/healthz", ["Host": "attacker.example"])).status == 200)
    }

    @Test func aPostFromAnotherSitesPageIsRefusedEvenWithTheToken() throws {
        let directory = try TemporaryDirectory()
        let service = PipelineService(
            PipelineService.Configuration(paths: [directory.path], load: ServiceAPITests.Served.load, log: { _ in }))
        let token = HeldRunApprovalTests.token
        for api in [ServiceAPI(service: service, token: nil), ServiceAPI(service: service, token: token)] {
            var headers: HTTPHeaders = ["Host": "127.0.0.1:8484", "Authorization": "Bearer " + token]
            headers["Origin"] = "https://attacker.example"
            #expect(api.handle(request("POST", "/api/pipelines/none/run", headers)).status == 403)
            headers["Origin"] = "null"
            #expect(api.handle(request("POST", "/api/pipelines/none/run", headers)).status == 403)
            // The service's own origin, and a request with no Origin (curl), reach the endpoint (no such pipeline).
            headers["Origin"] = "http://127.0.0.1:8484"
            #expect(api.handle(request("POST", "/api/pipelines/none/run", headers)).status == 404)
            headers["Origin"] = nil
            #expect(api.handle(request("POST", "/api/pipelines/none/run", headers)).status == 404)
            // Reading is no forgery: a GET with a foreign Origin is answered as any other.
            headers["Origin"] = "https://attacker.example"
            #expect(api.handle(request("GET", "/api/pipelines", headers)).status == 200)
        }
    }
}
