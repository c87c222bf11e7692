import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncSodium
import Foundation
import Synchronization

/// The service's HTTP face: health, readiness, metrics, the JSON API and the page.
///
/// With a token every endpoint but `/healthz` wants it, as `Authorization: Bearer TOKEN` or as the password of
/// HTTP Basic authentication (what a browser asks a person for), compared in constant time. Every error is JSON with
/// a 4xx or 5xx status: `{"error": {"code": "ERR_…", "message": "…", "status": N}}`.
package struct ServiceAPI: HTTPResponder {
    let service: PipelineService
    /// The token's SHA-256, so comparing never depends on where the first differing byte is or on the length.
    private let tokenDigest: [UInt8]?
    /// The page and the metrics as last rendered, reused until the service changes (the page: or the second turns,
    /// since it says how long ago things were), so a scraper or a crowd reloading costs no rendering.
    private let rendered = RenderedAnswers()

    /// The most runs `/api/runs` lists at once.
    static let runLimit = 1000

    /// What the listener in front of it counted, for `/metrics`; nil when there is none to show.
    let listener: HTTPListenerCounters?

    package init(service: PipelineService, token: String?, listener: HTTPListenerCounters? = nil) {
        self.service = service
        self.listener = listener
        tokenDigest = token.map { SHA256.hash(Array($0.utf8)) }
    }

    /// The 403 or 401 a request gets by its head alone, or nil when it may go on: checked before the server reads
    /// any of the body.
    package func screen(_ head: ReceivedRequest) -> HTTPResponse? {
        let path = head.path.removingPercentEncoding ?? head.path
        guard path != "/healthz" else { return nil }
        if let refused = browserRefusal(head) { return refused }
        guard !authorized(head) else { return nil }
        var response = Self.error(
            401, "ERR_UNAUTHORIZED",
            "this service wants its token: send `Authorization: Bearer TOKEN` (the contents of --token-file)")
        response.headers.add("WWW-Authenticate", "Bearer realm=\"cloudsync\"")
        response.headers.add("WWW-Authenticate", "Basic realm=\"cloudsync\", charset=\"UTF-8\"")
        return response
    }

    package func respond(to request: ReceivedRequest) -> HTTPResponse { handle(request) }

    /// A request the server refused on its own (a limit, overload), in the API's error shape.
    package func answer(_ refusal: HTTPRequestRefusal) -> HTTPResponse {
        Self.error(refusal.status, refusal.code, refusal.message)
    }

    /// The answer to `request`, its token checked as ``screen(_:)`` checks it.
    package func handle(_ request: ReceivedRequest) -> HTTPResponse {
        if let refused = screen(request) { return refused }
        let path = request.path.removingPercentEncoding ?? request.path
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        let method = request.method == "HEAD" ? "GET" : request.method
        switch segments {
        case [""]:
            return only("GET", method) { page(request) }
        case ["healthz"]:
            return only("GET", method) { .json(["status": "ok"]) }
        case ["readyz"]:
            return only("GET", method) { readiness() }
        case ["metrics"]:
            return only("GET", method) {
                rendered.answer("metrics", version: "\(service.changes.current)-\(listener?.version ?? 0)") {
                    .text(
                        200,
                        ServiceMetrics.render(
                            service.pipelines, failedFiles: service.failedFiles, startedAt: service.startedAt,
                            listener: listener),
                        headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"])
                }
            }
        case ["api", "pipelines"]:
            return only("GET", method) { .json(PipelinesBody(service)) }
        case ["api", "runs"]:
            return only("GET", method) { runs(request) }
        case let parts where parts.count == 3 && parts[0] == "api" && parts[1] == "runs" && !parts[2].isEmpty:
            return only("GET", method) {
                guard let report = service.report(id: parts[2]) else {
                    return Self.error(
                        404, "ERR_NOT_FOUND",
                        "no run '\(parts[2])' in the history of the pipelines served; GET /api/runs lists them")
                }
                return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: report)
            }
        case let parts where parts.count == 4 && parts[0] == "api" && parts[1] == "pipelines" && parts[3] == "run":
            return only("POST", method) { requestRun(parts[2], request) }
        default:
            return Self.error(
                404, "ERR_NOT_FOUND",
                "no endpoint \(path); there are /, /healthz, /readyz, /metrics, /api/pipelines, /api/runs, "
                    + "/api/runs/ID and POST /api/pipelines/NAME/run")
        }
    }

    private func only(_ allowed: String, _ method: String, _ answer: () -> HTTPResponse) -> HTTPResponse {
        guard method == allowed else {
            var response = Self.error(405, "ERR_METHOD", "this endpoint answers \(allowed) only, not \(method)")
            response.headers["Allow"] = allowed == "GET" ? "GET, HEAD" : allowed
            return response
        }
        return answer()
    }

    /// What a web page open in a browser on this machine could otherwise make the browser do here.
    ///
    /// Without a token the service trusts that only this machine reaches it, so a request must be addressed to a
    /// loopback host: a site whose name its owner points at 127.0.0.1 (DNS rebinding) gets its own name in `Host`,
    /// and is refused. And a request that changes something (a run) must not come from another site's page: a
    /// browser sends such a cross-site POST with any Basic credentials it remembers, but names the page in `Origin`.
    private func browserRefusal(_ head: ReceivedRequest) -> HTTPResponse? {
        let host = head.headers["Host"]
        if tokenDigest == nil, let host, !Self.isLoopbackHost(host) {
            return Self.error(
                403, "ERR_FORBIDDEN",
                "this service has no token, so it answers only requests addressed to this machine (localhost, "
                    + "127.0.0.1, [::1]), not Host '\(host)'; to reach it under another name, start it with "
                    + "--token-file")
        }
        if head.method != "GET", head.method != "HEAD", let origin = head.headers["Origin"],
            Self.authority(ofOrigin: origin) != host?.lowercased()
        {
            return Self.error(
                403, "ERR_FORBIDDEN",
                "a page of another site (Origin '\(origin)') may not change anything here; send the request "
                    + "yourself (curl), not from a web page")
        }
        return nil
    }

    /// Whether a `Host` header names this machine: `localhost`, a 127.x.x.x address or `[::1]`, with any port.
    static func isLoopbackHost(_ host: String) -> Bool {
        let lowered = host.lowercased()
        if lowered.hasPrefix("[") {
            return lowered.hasPrefix("[::1]") && (lowered == "[::1]" || lowered.dropFirst(5).hasPrefix(":"))
        }
        let name = lowered.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if name == "localhost" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `host:port` of an `Origin` (`http://127.0.0.1:8484`), lower case; nil for `null` or anything else.
    static func authority(ofOrigin origin: String) -> String? {
        guard let scheme = origin.range(of: "://") else { return nil }
        let authority = origin[scheme.upperBound...]
        guard !authority.isEmpty, !authority.contains("/") else { return nil }
        return authority.lowercased()
    }

    private func authorized(_ request: ReceivedRequest) -> Bool {
        guard let tokenDigest else { return true }
        guard let header = request.headers["Authorization"] else { return false }
        var presented: String?
        if header.lowercased().hasPrefix("bearer ") {
            presented = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        } else if header.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        {
            presented = String(text[text.index(after: colon)...])
        }
        guard let presented else { return false }
        return constantTimeEquals(SHA256.hash(Array(presented.utf8)), tokenDigest)
    }

    private func readiness() -> HTTPResponse {
        struct Body: Encodable {
            let ready: Bool
            let pipelines: [String: String]
            let files: [String: String]
        }
        var pipelines: [String: String] = [:]
        for (name, problem) in service.stateReachability() { pipelines[name] = problem ?? "ok" }
        for status in service.pipelines {
            if let error = status.loadError { pipelines[status.name] = "its file did not load: \(error)" }
        }
        let files = service.failedFiles
        let ready = files.isEmpty && pipelines.values.allSatisfy { $0 == "ok" } && !pipelines.isEmpty
        return .json(Body(ready: ready, pipelines: pipelines, files: files), status: ready ? 200 : 503)
    }

    private func runs(_ request: ReceivedRequest) -> HTTPResponse {
        var limit = 20
        if let text = request.query("limit") {
            guard let number = Int(text), (1...Self.runLimit).contains(number) else {
                return Self.error(
                    400, "ERR_BAD_REQUEST", "limit must be a whole number from 1 to \(Self.runLimit); found '\(text)'")
            }
            limit = number
        }
        let pipeline = request.query("pipeline").flatMap { $0.isEmpty ? nil : $0 }
        if let pipeline, service.compiled(named: pipeline) == nil {
            return Self.error(
                404, "ERR_NOT_FOUND",
                "no pipeline '\(pipeline)' is served; GET /api/pipelines lists them"
                    + (closestName(pipeline).map { "; did you mean '\($0)'?" } ?? ""))
        }
        let (runs, errors) = service.history(pipeline: pipeline, limit: limit)
        return .json(RunsBody(runs: runs.map(RunLine.init), errors: errors))
    }

    /// How a held run of `name` is approved once, for the API's `held.approve`.
    static func approval(for name: String) -> String {
        "POST /api/pipelines/\(name)/run with the body {\"force\": true} as application/json, and the token"
    }

    /// The same as a command a person can paste, the token read from the file they keep it in.
    static func approvalCommand(for name: String) -> String {
        "curl -X POST -H \"Authorization: Bearer $(cat TOKEN_FILE)\" -H 'Content-Type: application/json' "
            + "-d '{\"force\": true}' http://ADDRESS:PORT/api/pipelines/\(name)/run"
    }

    /// What a run request's body asks: nothing (an empty body), or `{"force": true}` to let its jobs delete past
    /// their `maxDeletes` once, as `cloudsync run --force` does.
    private func runOptions(_ request: ReceivedRequest) -> Result<Bool, HTTPResponseError> {
        guard !request.body.isEmpty else { return .success(false) }
        let type = request.headers["Content-Type"]?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            return .failure(
                HTTPResponseError(
                    Self.error(
                        415, "ERR_BAD_REQUEST",
                        "send the body as JSON with Content-Type: application/json, such as {\"force\": true}")))
        }
        // Booleans only: JSONDecoder takes no 1 or "true" for one.
        guard let object = try? JSONDecoder().decode([String: Bool].self, from: request.body) else {
            return .failure(
                HTTPResponseError(
                    Self.error(
                        400, "ERR_BAD_REQUEST", "the body is not {} or {\"force\": true} (a JSON object of booleans)"))
            )
        }
        if let unknown = object.keys.sorted().first(where: { $0 != "force" }) {
            return .failure(
                HTTPResponseError(
                    Self.error(400, "ERR_BAD_REQUEST", "the body has '\(unknown)'; a run request takes only \"force\""))
            )
        }
        let flag = object["force"] ?? false
        if flag, tokenDigest == nil {
            return .failure(
                HTTPResponseError(
                    Self.error(
                        403, "ERR_FORBIDDEN",
                        "approving deletions past maxDeletes needs the service started with --token-file, so that "
                            + "only those who hold the token can approve them; or run `cloudsync run FILE --force`")))
        }
        return .success(flag)
    }

    private func requestRun(_ name: String, _ request: ReceivedRequest) -> HTTPResponse {
        let force: Bool
        switch runOptions(request) {
        case .success(let asked): force = asked
        case .failure(let refusal): return refusal.response
        }
        switch service.requestRun(name, force: force) {
        case .started:
            struct Started: Encodable {
                let started: String
                let runs: String
                let force: Bool?
            }
            return .json(
                Started(started: name, runs: "/api/runs?pipeline=\(name)", force: force ? true : nil), status: 202)
        case .busy:
            return Self.error(409, "ERR_BUSY", "\(name) is running or flushing its outbox; try again when it ends")
        case .unknown:
            return Self.error(
                404, "ERR_NOT_FOUND",
                "no pipeline '\(name)' is served" + (closestName(name).map { "; did you mean '\($0)'?" } ?? ""))
        case .stopping:
            return Self.error(503, "ERR_STOPPING", "the service is stopping and starts no run")
        }
    }

    private func page(_ request: ReceivedRequest) -> HTTPResponse {
        let now = Date()
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        return rendered.answer("page", version: "\(service.changes.current)@\(second)") {
            var headers: HTTPHeaders = ["Content-Type": "text/html; charset=utf-8"]
            headers["Cache-Control"] = "no-store"
            headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
            let html = StatusPage.render(service.pipelines, failedFiles: service.failedFiles, now: now)
            return HTTPResponse(status: 200, headers: headers, body: Data(html.utf8))
        }
    }

    private func closestName(_ name: String) -> String? {
        closest(name, among: service.pipelines.map(\.name))
    }

    /// The JSON error every endpoint answers with.
    static func error(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        struct Body: Encodable {
            struct Detail: Encodable {
                let code: String
                let message: String
                let status: Int
            }
            let error: Detail
        }
        return .json(Body(error: .init(code: code, message: message, status: status)), status: status)
    }
}

/// An answer that ends a request early, carried as an error.
struct HTTPResponseError: Error {
    let response: HTTPResponse
    init(_ response: HTTPResponse) { self.response = response }
}

/// Answers rendered from the service's state, each kept with the version of the state it was rendered from.
final class RenderedAnswers: Sendable {
    private let kept = Mutex<[String: (version: String, response: HTTPResponse)]>([:])

    /// The answer kept under `name` when it was rendered at `version`, else `render()`'s, kept for next time.
    ///
    /// Two requests that miss at once both render; the second's answer is kept, and both are right.
    func answer(_ name: String, version: String, render: () -> HTTPResponse) -> HTTPResponse {
        if let hit = kept.withLock({ $0[name] }), hit.version == version { return hit.response }
        let response = render()
        kept.withLock { $0[name] = (version, response) }
        return response
    }
}
