import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import FoundationNetworking
import Glibc
import Testing

/// The server against an independent client (URLSession over libcurl) and, for what URLSession cannot do on cue
/// (pipelining, a chunked body with extensions, a client that stays connected), a raw socket.
///
/// Serialized: URLSession spins a core while it waits, and raw-socket reads block a thread of the two-thread pool.
@Suite(.serialized) struct LoopbackHTTPServerTests {
    private struct Item: Codable, Equatable {
        let id: String
        let size: Int
    }

    /// A server with a small file API: get, upload (echoes size), replace, delete, and an echo of the request.
    private func makeServer() throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer()
        server.route("GET /files/{id}") { request in
            .json(Item(id: request.captures["id"]!, size: Int(request.query("size") ?? "0") ?? -1))
        }
        server.route("POST /upload/{name...}") { request in
            .json(Item(id: request.captures["name"]!, size: request.body.count), status: 201)
        }
        server.route("PUT /files/{id}") { request in
            HTTPResponse(status: 200, headers: ["ETag": "\"\(request.body.count)\""], body: request.body)
        }
        server.route("DELETE /files/{id}") { _ in HTTPResponse(status: 204) }
        server.route("GET /ping") { _ in .text(200, "pong") }
        return server
    }

    private func makeSession(timeout: TimeInterval = 10) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpMaximumConnectionsPerHost = 1
        return URLSession(configuration: configuration)
    }

    private func send(
        _ session: URLSession, _ method: String, _ url: URL, body: Data? = nil, headers: [String: String] = [:]
    ) async throws -> (status: Int, body: Data, response: HTTPURLResponse) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) =
            if let body {
                try await session.upload(for: request, from: body)
            } else {
                try await session.data(for: request)
            }
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, data, http)
    }

    // MARK: Round trips

    @Test func getPostPutDeleteRoundTrip() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let session = makeSession()

        let get = try await send(session, "GET", server.url("/files/a%20b?size=12&flag"))
        #expect(get.status == 200)
        #expect(try JSONDecoder().decode(Item.self, from: get.body) == Item(id: "a b", size: 12))
        #expect(get.response.value(forHTTPHeaderField: "Content-Type") == "application/json")

        let post = try await send(session, "POST", server.url("/upload/dir/x.bin"), body: Data(count: 300))
        #expect(post.status == 201)
        #expect(try JSONDecoder().decode(Item.self, from: post.body) == Item(id: "dir/x.bin", size: 300))

        let put = try await send(session, "PUT", server.url("/files/7"), body: Data("new".utf8))
        #expect(put.status == 200)
        #expect(put.body == Data("new".utf8))
        #expect(put.response.value(forHTTPHeaderField: "etag") == "\"3\"")

        let delete = try await send(session, "DELETE", server.url("/files/7"))
        #expect(delete.status == 204)
        #expect(delete.body.isEmpty)

        let log = server.requestLog
        #expect(log.map(\.method) == ["GET", "POST", "PUT", "DELETE"])
        #expect(log.map(\.status) == [200, 201, 200, 204])
        #expect(log.map(\.bodySize) == [0, 300, 3, 0])
        #expect(log[0].path == "/files/a%20b")
        #expect(log[0].queryItems == [URLQueryItem(name: "size", value: "12"), URLQueryItem(name: "flag", value: nil)])
        #expect(log[1].route == "POST /upload/{name...}")
        #expect(log[1].headers["content-length"] == "300")
        #expect(!log.contains { $0.answeredByFault })
    }

    @Test func unknownRouteIs404NamingMethodAndPath() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let result = try await send(makeSession(), "PATCH", server.url("/files/1/extra?x=1"))
        #expect(result.status == 404)
        let body = try #require(try JSONSerialization.jsonObject(with: result.body) as? [String: Any])
        #expect(body["method"] as? String == "PATCH")
        #expect(body["path"] as? String == "/files/1/extra")
        #expect(server.counters(for: nil).statuses == [404: 1])
        #expect(server.requestLog.first?.route == nil)
    }

    @Test func headUsesTheGetRouteWithoutABody() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let result = try await send(makeSession(), "HEAD", server.url("/ping"))
        #expect(result.status == 200)
        #expect(result.body.isEmpty)
        #expect(result.response.value(forHTTPHeaderField: "Content-Length") == "4")
        // A raw client sees no body bytes after the head, and the connection stays usable.
        let client = try RawClient(port: server.port)
        client.send("HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        let text = client.receive { $0.hasSuffix("pong") }
        #expect(text.components(separatedBy: "HTTP/1.1 200 OK").count == 3)
        #expect(text.components(separatedBy: "pong").count == 2)
    }

    /// A route that answers HEAD itself without a body (a proxy relaying one) keeps the length it gave: the length a
    /// GET would send, which is what HEAD is asked for.
    @Test func aHeadRouteAnsweringWithoutABodyKeepsItsContentLength() async throws {
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        server.route(try HTTPRoutePattern(parsing: "HEAD /object")) { _ in
            HTTPResponse(status: 200, headers: ["Content-Length": "300000", "ETag": "\"e\""])
        }
        server.route(try HTTPRoutePattern(parsing: "GET /object")) { _ in
            HTTPResponse(status: 200, headers: ["Content-Length": "999"], body: Data("abc".utf8))
        }
        let head = try await send(makeSession(), "HEAD", server.url("/object"))
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.response.value(forHTTPHeaderField: "Content-Length") == "300000")
        // A body always sets its own length, whatever the handler said.
        let get = try await send(makeSession(), "GET", server.url("/object"))
        #expect(get.response.value(forHTTPHeaderField: "Content-Length") == "3")
    }

    /// What a client sends to a proxy: the absolute form routes by its path and is logged as sent; `CONNECT`'s
    /// authority form matches no route.
    @Test func absoluteFormTargetsRouteByTheirPathAndAreLoggedAsSent() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(
            "GET http://origin.example:8080/files/7?size=3 HTTP/1.1\r\nHost: origin.example:8080\r\n\r\n"
                + "HEAD http://origin.example HTTP/1.1\r\nHost: origin.example\r\n\r\n"
                + "CONNECT origin.example:443 HTTP/1.1\r\nHost: origin.example:443\r\nConnection: close\r\n\r\n")
        let text = client.receiveUntilClosed()
        #expect(text.contains(#"{"id":"7","size":3}"#))
        let log = server.requestLog
        #expect(
            log.map(\.target) == [
                "http://origin.example:8080/files/7?size=3", "http://origin.example", "origin.example:443",
            ])
        #expect(log.map(\.path) == ["/files/7", "/", "origin.example:443"])
        #expect(log.map(\.status) == [200, 404, 404])
        #expect(log.first?.queryItems == [URLQueryItem(name: "size", value: "3")])
        // The bytes of body each answer carried: the JSON, none for HEAD, the 404's error body.
        #expect(log[0].responseBodySize == 19)
        #expect(log[1].responseBodySize == 0)
        #expect((log[2].responseBodySize ?? 0) > 0)
    }

    // MARK: Connections and bodies

    @Test func keepAliveReusesOneConnection() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let session = makeSession()
        for index in 0..<50 {
            let result = try await send(session, "GET", server.url("/files/\(index)"))
            #expect(result.status == 200)
        }
        let log = server.requestLog
        #expect(log.count == 50)
        #expect(Set(log.map(\.connectionID)).count == 1)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(
            "GET /files/1 HTTP/1.1\r\nHost: x\r\n\r\nPUT /files/2 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                + "GET /files/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let text = client.receiveUntilClosed()
        let first = try #require(text.range(of: "\"id\":\"1\""))
        let second = try #require(text.range(of: "hello"))
        let third = try #require(text.range(of: "\"id\":\"3\""))
        #expect(first.lowerBound < second.lowerBound && second.lowerBound < third.lowerBound)
        #expect(text.contains("Connection: close"))
        #expect(Set(server.requestLog.map(\.connectionID)).count == 1)
    }

    @Test func chunkedUploadFromAStream() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        var request = URLRequest(url: server.url("/upload/streamed"))
        request.httpMethod = "POST"
        // No Content-Length: libcurl has to send the stream chunked.
        request.httpBodyStream = InputStream(data: payload)
        let (data, response) = try await makeSession().data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect(try JSONDecoder().decode(Item.self, from: data).size == payload.count)
        let entry = try #require(server.requestLog.first)
        #expect(entry.headers["Transfer-Encoding"]?.lowercased() == "chunked")
        #expect(entry.bodySize == payload.count)
    }

    @Test func chunkedBodyWithExtensionsAndTrailers() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send(
            "PUT /files/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n")
        let text = client.receive { $0.hasSuffix("hello 0123456789") }
        #expect(text.contains("Content-Length: 16"))
        #expect(server.requestLog.first?.bodySize == 16)
    }

    @Test func largePostGets100ContinueAndArrivesWhole() async throws {
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        server.route("POST /blob") { request in
            var sum: UInt64 = 0
            for byte in request.body { sum = sum &* 31 &+ UInt64(byte) }
            return .json(["size": request.body.count, "sum": Int(truncatingIfNeeded: sum)])
        }
        let payload = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) })
        var expected: UInt64 = 0
        for byte in payload { expected = expected &* 31 &+ UInt64(byte) }
        // FoundationNetworking turns libcurl's automatic Expect off, so ask for it as a client that wants it would.
        let result = try await send(
            makeSession(), "POST", server.url("/blob"), body: payload, headers: ["Expect": "100-continue"])
        #expect(result.status == 200)
        let body = try JSONDecoder().decode([String: Int].self, from: result.body)
        #expect(body == ["size": payload.count, "sum": Int(truncatingIfNeeded: expected)])
        #expect(server.requestLog.first?.headers["Expect"] == "100-continue")

        // The interim answer itself, seen on a raw socket before any body byte is sent.
        let client = try RawClient(port: server.port)
        client.send("POST /blob HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
        #expect(client.receive { $0.hasSuffix("\r\n\r\n") } == "HTTP/1.1 100 Continue\r\n\r\n")
        client.send("abc")
        #expect(client.receive { $0.hasSuffix("}") }.contains("\"size\":3"))
    }

    @Test func twoThousandSmallRequestsOnOneConnection() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let session = makeSession()
        let start = ContinuousClock.now
        for _ in 0..<2000 {
            let (data, _) = try await session.data(from: server.url("/ping"))
            #expect(data.count == 4)
        }
        let elapsed = ContinuousClock.now - start
        print("loopback benchmark: 2,000 GETs on one kept-alive connection (URLSession) in \(elapsed)")
        #expect(Set(server.requestLog.map(\.connectionID)).count == 1)
        #expect(server.counters(for: "GET /ping").statuses == [200: 2000])
    }

    // MARK: Faults

    @Test func errorSequenceHitsExactlyTheChosenCallsOfTheRoute() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [3, 4], route: "GET /files/{id}")]))
        let session = makeSession()
        var statuses: [Int] = []
        for index in 1...6 {
            statuses.append(try await send(session, "GET", server.url("/files/\(index)")).status)
            #expect(try await send(session, "GET", server.url("/ping")).status == 200)
        }
        #expect(statuses == [200, 200, 503, 503, 200, 200])
        let counters = server.counters(for: "GET /files/{id}")
        #expect(counters.requests == 6 && counters.faults == 2 && counters.statuses == [200: 4, 503: 2])
        #expect(server.counters(for: "GET /ping").faults == 0)

        // A plan set again counts from 1 again; a cleared plan injects nothing.
        server.setFaultPlan(HTTPFaultPlan([.errors(500, onCalls: [1])]))
        #expect(try await send(session, "GET", server.url("/ping")).status == 500)
        server.clearFaultPlan()
        #expect(try await send(session, "GET", server.url("/ping")).status == 200)
    }

    @Test func seededErrorRateRepeats() async throws {
        let server = try makeServer()
        defer { server.stop() }
        let session = makeSession()
        func run(seed: UInt64) async throws -> [Int] {
            server.setFaultPlan(HTTPFaultPlan([.errorRate(0.3, seed: seed, status: 500)]))
            var statuses: [Int] = []
            for _ in 0..<60 { statuses.append(try await send(session, "GET", server.url("/ping")).status) }
            return statuses
        }
        let first = try await run(seed: 42)
        let again = try await run(seed: 42)
        let other = try await run(seed: 43)
        #expect(first == again)
        #expect(first != other)
        let failures = first.filter { $0 == 500 }.count
        #expect((5...35).contains(failures))
        #expect(Set(first) == [200, 500])
    }

    @Test func tooManyRequestsCarriesRetryAfter() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.tooManyRequests(retryAfterSeconds: 2, on: .calls([1]))]))
        let session = makeSession()
        let limited = try await send(session, "GET", server.url("/ping"))
        #expect(limited.status == 429)
        #expect(limited.response.value(forHTTPHeaderField: "Retry-After") == "2")
        #expect(try await send(session, "GET", server.url("/ping")).status == 200)
        #expect(server.requestLog.map(\.fault) == [.tooManyRequests(retryAfterSeconds: 2), nil])
    }

    @Test func latencyDelaysThenAnswersNormally() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.latency(milliseconds: 150, route: "GET /ping")]))
        let start = ContinuousClock.now
        #expect(try await send(makeSession(), "GET", server.url("/ping")).body == Data("pong".utf8))
        #expect(ContinuousClock.now - start >= .milliseconds(150))
        let entry = try #require(server.requestLog.first)
        #expect(entry.latencyMilliseconds == 150 && entry.status == 200 && !entry.answeredByFault)
    }

    @Test func tokenExpiresAfterNCalls() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.tokenExpiry(afterCalls: 2)]))
        let session = makeSession()
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(try await send(session, "GET", server.url("/ping")).status) }
        #expect(statuses == [200, 200, 401, 401])
    }

    @Test func hangEndsWhenTheClientCancelsAndTheServerStaysHealthy() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.hang(on: .calls([1]), route: "GET /files/{id}")]))
        let session = makeSession()
        let hung = Task { try await session.data(from: server.url("/files/slow")) }
        try await waitUntil { server.requestLog.count == 1 }
        #expect(server.openConnectionCount == 1)
        let start = ContinuousClock.now
        hung.cancel()
        await #expect(throws: URLError.self) { try await hung.value }
        // The hang lasts until the client goes: the bound only tells cancellation from URLSession's own timeout.
        #expect(ContinuousClock.now - start < .seconds(20))
        // The hung connection's thread ends once libcurl drops the connection.
        try await waitUntil { server.openConnectionCount == 0 }
        #expect(try await send(session, "GET", server.url("/files/2")).status == 200)
        #expect(server.requestLog.map(\.status) == [nil, 200])
        #expect(server.requestLog.first?.fault == .hang)
    }

    @Test func hangEndsWithTheClientsOwnTimeout() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(HTTPFaultPlan([.hang(on: .calls([1]))]))
        let session = makeSession(timeout: 1)
        let start = ContinuousClock.now
        await #expect {
            _ = try await session.data(from: server.url("/ping"))
        } throws: { error in
            (error as? URLError)?.code == .timedOut
        }
        #expect(ContinuousClock.now - start < .seconds(20), "the hang lasts until the client goes")
        #expect(try await send(session, "GET", server.url("/ping")).status == 200)
    }

    @Test func hangEndsWhenTheServerStops() async throws {
        let server = try makeServer()
        server.setFaultPlan(HTTPFaultPlan([.hang()]))
        let client = try RawClient(port: server.port)
        client.send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        try await waitUntil { !server.requestLog.isEmpty }
        server.stop()
        #expect(client.receiveUntilClosed() == "")
    }

    @Test func resetMidBodyIsANetworkErrorForTheClient() async throws {
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        server.route("GET /big") { _ in HTTPResponse(status: 200, body: Data(count: 100_000)) }
        server.setFaultPlan(HTTPFaultPlan([.resetMidBody(on: .calls([1]))]))
        let session = makeSession()
        await #expect(throws: URLError.self) { _ = try await session.data(from: server.url("/big")) }
        let entry = try #require(server.requestLog.first)
        #expect(entry.fault == .resetMidBody && entry.status == 200)
        #expect(try await session.data(from: server.url("/big")).0.count == 100_000)

        // On a raw socket: the head promises the whole body, half of it comes, then the connection is reset.
        server.setFaultPlan(HTTPFaultPlan([.resetMidBody()]))
        let client = try RawClient(port: server.port)
        client.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        let received = client.receiveBytesUntilClosed()
        #expect(client.lastError == ECONNRESET)
        #expect(String(decoding: received.prefix(200), as: UTF8.self).contains("Content-Length: 100000"))
        #expect(received.count < 100_000)
    }

    @Test func rulesApplyInOrderAndLatencyAddsUp() async throws {
        let server = try makeServer()
        defer { server.stop() }
        server.setFaultPlan(
            HTTPFaultPlan([
                .latency(milliseconds: 20), .errors(502, onCalls: [1]), .errors(503, onCalls: [1, 2]),
                .latency(milliseconds: 30, on: .calls([2])),
            ]))
        let session = makeSession()
        #expect(try await send(session, "GET", server.url("/ping")).status == 502)
        #expect(try await send(session, "GET", server.url("/ping")).status == 503)
        #expect(try await send(session, "GET", server.url("/ping")).status == 200)
        #expect(server.requestLog.map(\.latencyMilliseconds) == [20, 50, 20])
        server.clearLog()
        #expect(server.requestLog.isEmpty && server.counters(for: "GET /ping") == HTTPRouteCounters())
    }

    // MARK: Stopping

    @Test func stopFromAHandlerDoesNotDeadlock() async throws {
        let server = try LoopbackHTTPServer()
        server.route("POST /stop") { [weak server] _ in
            server?.stop()
            return .text(200, "stopping")
        }
        // The handler's own connection is shut down with the rest, so the client sees an error, not the answer.
        await #expect(throws: URLError.self) { _ = try await send(makeSession(), "POST", server.url("/stop")) }
        server.stop()
        #expect(server.openConnectionCount == 0)
        #expect(canBind(port: server.port))
    }

    @Test func stopWithClientsConnectedReturnsAndFreesThePort() async throws {
        let server = try makeServer()
        let port = server.port
        let session = makeSession()
        #expect(try await send(session, "GET", server.url("/ping")).status == 200)
        let idle = try RawClient(port: port)
        let midRequest = try RawClient(port: port)
        midRequest.send("PUT /files/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        try await waitUntil { server.openConnectionCount == 3 }

        server.stop()
        #expect(server.openConnectionCount == 0)
        #expect(idle.receiveUntilClosed() == "")
        #expect(midRequest.receiveUntilClosed() == "")
        #expect(throws: RawClient.ConnectError.self) { try RawClient(port: port) }
        #expect(canBind(port: port))
        server.stop()
    }

    // MARK: Values

    @Test func faultPlanReadsTheDocumentedJSON() throws {
        let json = """
            {"rules": [
              {"route": "GET /drive/v3/files/{id}", "calls": [3, 4], "status": 503},
              {"rate": 0.2, "seed": 7, "status": 500},
              {"afterCalls": 10, "status": 401},
              {"status": 429, "retryAfterSeconds": 2},
              {"latencyMs": 150},
              {"calls": [1], "hang": true},
              {"calls": [2], "resetMidBody": true}
            ]}
            """
        let plan = try JSONDecoder().decode(HTTPFaultPlan.self, from: Data(json.utf8))
        #expect(
            plan
                == HTTPFaultPlan([
                    .errors(503, onCalls: [3, 4], route: "GET /drive/v3/files/{id}"),
                    .errorRate(0.2, seed: 7, status: 500), .tokenExpiry(afterCalls: 10),
                    .tooManyRequests(retryAfterSeconds: 2), .latency(milliseconds: 150), .hang(on: .calls([1])),
                    .resetMidBody(on: .calls([2])),
                ]))
        let again = try JSONDecoder().decode(HTTPFaultPlan.self, from: JSONEncoder().encode(plan))
        #expect(again == plan)

        for bad in [
            #"{"rules": [{"calls": [1]}]}"#, #"{"rules": [{"status": 500, "hang": true}]}"#,
            #"{"rules": [{"calls": [1], "afterCalls": 2, "status": 500}]}"#,
            #"{"rules": [{"status": 503, "retryAfterSeconds": 2}]}"#, #"{"rules": [{"rate": 2, "status": 500}]}"#,
            #"{"rules": [{"route": "files/{id}", "status": 500}]}"#,
        ] {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(HTTPFaultPlan.self, from: Data(bad.utf8)) }
        }
    }

    @Test func routePatternsParseAndRefuse() throws {
        let pattern = try HTTPRoutePattern(parsing: "get /drive/v3/files/{id}")
        #expect(pattern.method == "GET")
        #expect(pattern.segments == [.literal("drive"), .literal("v3"), .literal("files"), .capture("id")])
        #expect(pattern.description == "GET /drive/v3/files/{id}")
        #expect(try HTTPRoutePattern(parsing: "PUT /b/{key...}").segments == [.literal("b"), .rest("key")])
        #expect(try HTTPRoutePattern(parsing: "GET /").segments == [.literal("")])
        for bad in ["GET", "GET files", "GET /a/{}", "GET /a/x{id}", "GET /{rest...}/a", "G3T /a", "GET /a b"] {
            #expect(throws: HTTPRoutePattern.ParseError.self) { try HTTPRoutePattern(parsing: bad) }
        }
    }

    @Test func headersCompareNamesWithoutCase() {
        var headers: HTTPHeaders = ["Set-Cookie": "a", "set-cookie": "b", "ETag": "1"]
        #expect(headers["SET-COOKIE"] == "a")
        #expect(headers.values(for: "Set-Cookie") == ["a", "b"])
        headers["etag"] = "2"
        #expect(headers.values(for: "ETag") == ["2"])
        headers["set-cookie"] = nil
        #expect(headers.fields.map { "\($0.name): \($0.value)" } == ["etag: 2"])
    }
}

/// Whether a listening socket can take `port` on 127.0.0.1 again.
private func canBind(port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = loopback(port: port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

private func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// A blocking TCP client for byte-exact exchanges; every read gives up after 10 seconds.
private final class RawClient {
    struct ConnectError: Error {
        let code: Int32
    }

    private let fd: Int32
    private var received: [UInt8] = []
    /// The `errno` of the read that ended the last receive, 0 for a clean close.
    private(set) var lastError: Int32 = 0

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw ConnectError(code: code)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, 0) }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Reads until the text received since the last call satisfies `done`, or the peer closes, or 10 s pass.
    func receive(until done: (String) -> Bool) -> String {
        received = []
        while !done(String(decoding: received, as: UTF8.self)), readSome() {}
        return String(decoding: received, as: UTF8.self)
    }

    func receiveUntilClosed() -> String {
        String(decoding: receiveBytesUntilClosed(), as: UTF8.self)
    }

    func receiveBytesUntilClosed() -> [UInt8] {
        received = []
        while readSome() {}
        return received
    }

    private func readSome() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
        lastError = count < 0 ? errno : 0
        guard count > 0 else { return false }
        received.append(contentsOf: buffer[..<count])
        return true
    }
}
