import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// The whole client — deadline, retry, auth, concurrency limit and `URLSessionTransport` over libcurl — against
/// ``LoopbackHTTPServer`` on real loopback sockets, the server's fault plans standing in for a misbehaving provider.
///
/// Time is a ``ManualClock``: backoff waits and deadlines pass only when a test moves it, so a retry schedule is
/// checked to the millisecond while the requests themselves travel over TCP. Serialized, because URLSession spins a
/// core while it waits on a silent server and the machine has two.
@Suite(.serialized) struct LoopbackClientTests {
    static let sentinel = "SENTINEL-loopback-7c1d2e3f4a5b"

    /// Values by key, shared by the server's handler threads and the test.
    final class Values: Sendable {
        private let values = Mutex<[String: Data]>([:])
        func withLock<T>(_ body: (inout [String: Data]) -> T) -> T { values.withLock { body(&$0) } }
    }

    /// A server with a small key-value API: values live in memory, `GET` of a missing one is 404.
    final class KeyValueServer: Sendable {
        let server: LoopbackHTTPServer
        let values = Values()

        init() throws {
            server = try LoopbackHTTPServer()
            server.route("GET /kv/{key}") { [values] request in
                guard let value = values.withLock({ $0[request.captures["key"]!] }) else { return .text(404, "no key") }
                return HTTPResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: value)
            }
            server.route("PUT /kv/{key}") { [values] request in
                values.withLock { $0[request.captures["key"]!] = request.body }
                return HTTPResponse(status: 204)
            }
            server.route("POST /kv") { [values] request in
                let key = "posted\(values.withLock { $0.count })"
                values.withLock { $0[key] = request.body }
                return .text(201, key)
            }
        }

        func url(_ path: String) -> URL { server.url(path) }
        deinit { server.stop() }
    }

    /// One provider's client of the server: its own URLSession, a manual clock, counters and a debug log.
    struct Harness {
        let clock = ManualClock()
        let metrics = ProviderMetrics()
        let log = LogSink()
        let transport: any HTTPTransport

        init(transport: any HTTPTransport = URLSessionTransport(maxConcurrency: 8)) {
            self.transport = transport
        }

        /// Jitter fixed at one half, so backoff waits are 100, 200, 400 ms...
        func client(
            authenticator: any HTTPAuthenticator = NoAuthentication(), timeout: Duration? = .seconds(30),
            policy: RetryPolicy = RetryPolicy(random: { 0.5 }), maxConcurrency: Int = 8
        ) -> HTTPClient {
            CloudSyncHTTPTests.client(
                transport, clock: clock, metrics: metrics, logger: log.logger, authenticator: authenticator,
                policy: policy, timeout: timeout, maxConcurrency: maxConcurrency)
        }
    }

    /// Runs `request` and moves the clock a second at a time whenever a retry waits on it (the deadline's timer is
    /// the other sleeper), until the call ends.
    static func drive(_ client: HTTPClient, _ request: HTTPRequest, on clock: ManualClock) async throws -> Result<
        HTTPResponse, CloudSyncError
    > {
        let done = Mutex(false)
        let task = Task {
            let result = await start(client, request).value
            done.withLock { $0 = true }
            return result
        }
        while true {
            try await waitUntil { done.withLock { $0 } || clock.sleeperCount >= 2 }
            if done.withLock({ $0 }) { return await task.value }
            clock.advance(by: .seconds(1))
        }
    }

    // MARK: Retry schedules

    @Test func a429sRetryAfterIsHonouredToTheMillisecond() async throws {
        let kv = try KeyValueServer()
        kv.values.withLock { $0["a"] = Data("value".utf8) }
        kv.server.setFaultPlan(HTTPFaultPlan([.tooManyRequests(retryAfterSeconds: 2, on: .calls([1]))]))
        let harness = Harness()
        let task = start(harness.client(), HTTPRequest(method: .get, url: kv.url("/kv/a")))
        // The deadline's timer and the retry's wait: the 429 has arrived over the socket.
        try await harness.clock.waitForSleepers(2)
        #expect(kv.server.requestLog.map(\.status) == [429])
        harness.clock.advance(by: .milliseconds(1999))
        #expect(harness.clock.sleeperCount == 2, "the retry must still be waiting")
        #expect(kv.server.requestLog.count == 1)
        harness.clock.advance(by: .milliseconds(1))
        let response = try #require(await task.value.value)
        #expect(response.status == 200)
        #expect(response.body == Data("value".utf8))
        #expect(kv.server.requestLog.map(\.status) == [429, 200])
        #expect(harness.metrics.reading.retries == 1)
        #expect(harness.metrics.reading.throttled == 1)
    }

    @Test func a503BurstBacksOffExponentiallyThenSucceeds() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [1, 2, 3])]))
        let harness = Harness()
        let started = harness.clock.nowMilliseconds()
        let put = HTTPRequest(method: .put, url: kv.url("/kv/b"), body: Data("bee".utf8))
        let task = start(harness.client(), put)
        // Full jitter at one half of 200, 400 and 800 ms.
        for (attempts, wait) in [(1, 100), (2, 200), (3, 400)] {
            try await harness.clock.waitForSleepers(2)
            #expect(kv.server.requestLog.count == attempts)
            harness.clock.advance(by: .milliseconds(wait - 1))
            #expect(harness.clock.sleeperCount == 2, "attempt \(attempts + 1) must wait \(wait) ms")
            harness.clock.advance(by: .milliseconds(1))
            try await waitUntil { kv.server.requestLog.count == attempts + 1 }
        }
        #expect(await task.value.value?.status == 204)
        #expect(harness.clock.nowMilliseconds() - started == 700)
        #expect(kv.server.requestLog.map(\.status) == [503, 503, 503, 204])
        #expect(kv.server.requestLog.map(\.bodySize) == [3, 3, 3, 3], "each attempt sends the whole body")
        #expect(kv.values.withLock { $0["b"] } == Data("bee".utf8))
    }

    @Test func theDeadlineCutsTheRetriesShortWithATimeout() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(HTTPFaultPlan([HTTPFaultRule(action: .status(503))]))
        let harness = Harness()
        let task = start(harness.client(timeout: .seconds(1)), HTTPRequest(method: .get, url: kv.url("/kv/a")))
        // 100 + 200 + 400 ms of backoff fit in the second; the next 800 would not.
        for wait in [100, 200, 400] {
            try await harness.clock.waitForSleepers(2)
            harness.clock.advance(by: .milliseconds(wait))
        }
        let error = try #require(await task.value.error)
        #expect(error.code == .timeout)
        #expect(error.message.contains("answered HTTP 503"), "\(error.message)")
        #expect(error.message.contains("deadline"), "\(error.message)")
        #expect(error.provider == "p1")
        #expect(kv.server.requestLog.count == 4)
        #expect(harness.metrics.reading.retries == 3)
    }

    @Test func aHungAttemptIsCutAtTheDeadlineOnTheManualClock() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [1]), .hang(on: .calls([2]))]))
        let harness = Harness()
        let task = start(harness.client(timeout: .seconds(1)), HTTPRequest(method: .get, url: kv.url("/kv/a")))
        try await harness.clock.waitForSleepers(2)
        harness.clock.advance(by: .milliseconds(100))
        try await waitUntil { kv.server.requestLog.count == 2 }
        harness.clock.advance(by: .milliseconds(899))
        #expect(harness.clock.sleeperCount == 1, "only the deadline's timer is left")
        let released = ContinuousClock.now
        harness.clock.advance(by: .milliseconds(1))
        let error = try #require(await task.value.error)
        // Released by the deadline, not by URLSession giving up on a silent connection after 60 s: a bound far from
        // both, so a busy machine does not break it and a missing deadline does.
        #expect(ContinuousClock.now - released < .seconds(20))
        #expect(error.code == .timeout)
        #expect(error.message.contains("within 1000 ms"), "\(error.message)")
        // The abandoned attempt is cancelled, so libcurl closes its connection and the hung handler ends.
        try await waitUntil { kv.server.openConnectionCount == 0 }
    }

    /// A hung server against the clock production uses: only a real timer proves ``SystemClock``'s part of the
    /// deadline, so this one test waits for real, a quarter of a second.
    ///
    /// The server hangs until the client goes, and URLSession gives up on a silent connection only after 60 s: the
    /// upper bound is far from both ends.
    @Test func aHungServerDoesNotHoldTheCallerPastARealDeadline() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(HTTPFaultPlan([.hang()]))
        let http = HTTPClient(
            transport: URLSessionTransport(), context: ProviderContext(providerID: "p1"), timeout: .milliseconds(250))
        let started = ContinuousClock.now
        let error = await start(http, HTTPRequest(method: .get, url: kv.url("/kv/a"))).value.error
        let elapsed = ContinuousClock.now - started
        #expect(error?.code == .timeout)
        #expect(error?.message.contains("within 250 ms") == true, "\(error?.message ?? "")")
        #expect(elapsed >= .milliseconds(250))
        #expect(elapsed < .seconds(20), "held for \(elapsed)")
        #expect(kv.server.requestLog.count == 1)
    }

    // MARK: Requests that must not be replayed

    @Test func aPOSTIsNotReplayedAfterA503OrAResetUnlessMarkedRetrySafe() async throws {
        let kv = try KeyValueServer()
        let harness = Harness()
        let http = harness.client()
        let post = HTTPRequest(method: .post, url: kv.url("/kv"), body: Data("once".utf8))

        kv.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [1])]))
        let refused = try #require(await start(http, post).value.error)
        #expect(refused.code == .server)
        #expect(refused.message.contains("not retried: POST is not idempotent"), "\(refused.message)")
        #expect(kv.server.requestLog.count == 1)

        kv.server.clearLog()
        kv.server.setFaultPlan(HTTPFaultPlan([.resetMidBody(on: .calls([1]))]))
        let reset = try #require(await start(http, post).value.error)
        #expect(reset.isRetryable, "\(reset)")
        #expect(reset.message.contains("not retried: POST is not idempotent"), "\(reset.message)")
        #expect(kv.server.requestLog.count == 1, "the handler ran once; a replay would store the value twice")

        var safe = post
        safe.isRetrySafe = true
        for rule in [HTTPFaultRule.errors(503, onCalls: [1]), .resetMidBody(on: .calls([1]))] {
            kv.server.clearLog()
            kv.server.setFaultPlan(HTTPFaultPlan([rule]))
            let result = try await Self.drive(http, safe, on: harness.clock)
            #expect(result.value?.status == 201, "\(rule.action): \(String(describing: result.error))")
            #expect(kv.server.requestLog.count == 2, "\(rule.action)")
        }
    }

    // MARK: Counters

    @Test func theProvidersCountersEqualTheServersLog() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(
            HTTPFaultPlan([
                .tooManyRequests(retryAfterSeconds: 1, on: .calls([2])), .errors(503, onCalls: [5]),
                .errors(500, onCalls: [6]),
            ]))
        let harness = Harness()
        let http = harness.client()
        var operations = 0
        for index in 0..<4 {
            let body = Data(String(repeating: "v", count: 100 * (index + 1)).utf8)
            let put = HTTPRequest(method: .put, url: kv.url("/kv/k\(index)"), body: body)
            #expect(try await Self.drive(http, put, on: harness.clock).value?.status == 204)
            let get = HTTPRequest(method: .get, url: kv.url("/kv/k\(index)"))
            #expect(try await Self.drive(http, get, on: harness.clock).value?.body == body)
            operations += 2
        }
        #expect(
            try await Self.drive(http, HTTPRequest(method: .get, url: kv.url("/kv/none")), on: harness.clock)
                .value?.status == 404)
        operations += 1

        let log = kv.server.requestLog
        let reading = harness.metrics.reading
        #expect(log.count == operations + 3)
        #expect(reading.requests == log.count)
        #expect(reading.bytesWritten == log.map(\.bodySize).reduce(0, +))
        #expect(reading.bytesRead == log.compactMap(\.responseBodySize).reduce(0, +))
        #expect(reading.throttled == log.filter { $0.status == 429 }.count)
        #expect(reading.retries == log.count - operations)
        #expect(reading.throttled == 1 && reading.retries == 3)
        var byKind: [String: Int] = [:]
        for entry in log { byKind["\(entry.method) \((entry.status ?? 0) / 100)xx", default: 0] += 1 }
        #expect(reading.httpRequests == byKind)
        #expect(byKind == ["PUT 2xx": 4, "GET 2xx": 4, "GET 4xx": 2, "GET 5xx": 2])
        // Nothing waited for a slot (one request at a time); the waits were the 429's Retry-After of 1 s, then 100
        // and 200 ms of backoff after the 503 and the 500.
        #expect(reading.waitMilliseconds == 1_300)
    }

    // MARK: Redaction

    /// Adds the sentinel as a bearer token.
    struct SentinelAuthenticator: HTTPAuthenticator {
        func authorize(_ request: inout HTTPRequest) async throws {
            request.headers["Authorization"] = "Bearer \(LoopbackClientTests.sentinel)"
        }
        func refresh(after response: HTTPResponse) async throws -> Bool { false }
    }

    @Test func aSentinelTokenNeverAppearsInTheLogErrorsOrDescriptions() async throws {
        let sentinel = Self.sentinel
        let kv = try KeyValueServer()
        // A careless server echoing the credentials it was sent, in a 400 and a 503.
        let echo: HTTPHandler = { request in
            .text(
                request.path.hasSuffix("bad") ? 400 : 503,
                "refused \(request.headers["Authorization"] ?? "") for \(request.target)")
        }
        kv.server.route("GET /echo/{what}", echo)
        let harness = Harness()
        let http = harness.client(authenticator: SentinelAuthenticator(), policy: RetryPolicy(maxAttempts: 2))
        let query = "?access_token=\(sentinel)&X-Amz-Signature=\(sentinel)&ckWebAuthToken=\(sentinel)&page=2"

        var texts: [String] = []
        let bad = HTTPRequest(method: .get, url: kv.url("/echo/bad" + query))
        let response = try #require(await start(http, bad).value.value)
        #expect(response.status == 400)
        #expect(String(decoding: response.body, as: UTF8.self).contains(sentinel), "the echo reached the client")
        texts += [
            bad.description, response.description,
            try #require(
                await start(http, HTTPRequest(method: .get, url: kv.url("/echo/bad" + query)))
                    .value.value.map { HTTPErrorMapping.error(for: $0, to: bad).description }),
        ]
        let failed = try #require(
            try await Self.drive(http, HTTPRequest(method: .get, url: kv.url("/echo/busy" + query)), on: harness.clock)
                .error)
        texts.append(failed.description)
        kv.server.setFaultPlan(HTTPFaultPlan([.resetMidBody()]))
        let broken = try #require(
            try await Self.drive(http, HTTPRequest(method: .get, url: kv.url("/echo/bad" + query)), on: harness.clock)
                .error)
        texts.append(broken.description)
        texts += harness.log.all

        // The credentials did travel: the server got each of them.
        let first = try #require(kv.server.requestLog.first)
        #expect(first.headers["Authorization"] == "Bearer \(sentinel)")
        #expect(first.queryItems.filter { $0.value == sentinel }.count == 3)

        for text in texts { #expect(!text.contains(sentinel), "\(text)") }
        #expect(failed.message.contains("refused Bearer <redacted> for /echo/busy?access_token=<redacted>&"))
        #expect(harness.log.all.count == kv.server.requestLog.count, "one debug line per request")
        #expect(
            harness.log.all.first?.hasPrefix(
                "GET /echo/bad?access_token=<redacted>&X-Amz-Signature=<redacted>&ckWebAuthToken=<redacted>&page=2"
                    + " -> 400 in ") == true, "\(harness.log.all)")
    }

    // MARK: Cancellation and sign-in

    @Test func cancellingTheCallerReleasesItAtOnceWhileTheServerHangs() async throws {
        let kv = try KeyValueServer()
        kv.server.setFaultPlan(HTTPFaultPlan([.hang()]))
        let harness = Harness()
        let task = start(harness.client(), HTTPRequest(method: .get, url: kv.url("/kv/a")))
        try await waitUntil { kv.server.requestLog.count == 1 }
        let cancelled = ContinuousClock.now
        task.cancel()
        let error = await task.value.error
        // At once, not when URLSession gives up on the silent connection after 60 s; room for a busy machine.
        #expect(ContinuousClock.now - cancelled < .seconds(20))
        #expect(error?.code == .cancelled)
        try await waitUntil { kv.server.openConnectionCount == 0 }
    }

    /// Bearer `token<n>`; a refresh moves to the next token, which the server then accepts (the plan is lifted).
    final class RefreshingAuthenticator: HTTPAuthenticator {
        let refreshes = Counter()
        let onRefresh: @Sendable () -> Void
        init(onRefresh: @escaping @Sendable () -> Void) { self.onRefresh = onRefresh }

        func authorize(_ request: inout HTTPRequest) async throws {
            request.headers["Authorization"] = "Bearer token\(refreshes.value)"
        }
        func refresh(after response: HTTPResponse) async throws -> Bool {
            refreshes.next()
            onRefresh()
            return true
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceAndTheRequestSentAgain() async throws {
        let kv = try KeyValueServer()
        kv.values.withLock { $0["a"] = Data("A".utf8) }
        kv.server.setFaultPlan(HTTPFaultPlan([.tokenExpiry(afterCalls: 2)]))
        let auth = RefreshingAuthenticator { [server = kv.server] in server.clearFaultPlan() }
        let http = Harness().client(authenticator: auth)
        for _ in 0..<5 {
            #expect(await start(http, HTTPRequest(method: .get, url: kv.url("/kv/a"))).value.value?.status == 200)
        }
        #expect(auth.refreshes.value == 1)
        let log = kv.server.requestLog
        #expect(log.map(\.status) == [200, 200, 401, 200, 200, 200])
        #expect(
            log.map { $0.headers["Authorization"] }
                == [
                    "Bearer token0", "Bearer token0", "Bearer token0", "Bearer token1", "Bearer token1",
                    "Bearer token1",
                ])

        // A token the server keeps refusing: one refresh, one more request, then ERR_NOT_SIGNED_IN.
        kv.server.clearLog()
        kv.server.setFaultPlan(HTTPFaultPlan([.tokenExpiry(afterCalls: 0)]))
        let stubborn = RefreshingAuthenticator {}
        let error = await start(
            Harness().client(authenticator: stubborn), HTTPRequest(method: .get, url: kv.url("/kv/a"))
        )
        .value.error
        #expect(error?.code == .notSignedIn)
        #expect(stubborn.refreshes.value == 1)
        #expect(kv.server.requestLog.map(\.status) == [401, 401])
    }

    // MARK: Connections

    /// 500 GETs, as a `multiGet` of 500 keys would send, through one client allowing 8 at a time.
    ///
    /// What bounds the connections: the transport sets libcurl's `CURLMOPT_MAX_HOST_CONNECTIONS` to 8
    /// (`httpMaximumConnectionsPerHost`), so at most 8 are ever open at once. How often they are reused is libcurl's
    /// affair: FoundationNetworking leaves `CURLMOPT_MAXCONNECTS` unset, so libcurl keeps at most 4 idle connections
    /// per transfer in progress, and when the transfers in progress dip to one or two (a finished request's successor
    /// not yet handed to libcurl) it closes idle connections above that and opens new ones later. Measured over 12
    /// runs: 8 open at the peak and 8 in flight every time, 8 to 42 distinct connections (median 10) for the 500
    /// requests; the bound of 100 leaves room for a loaded machine while still failing one connection per request.
    /// Requests cancelled at every moment of their life, many just as their answer arrives, all end: each is
    /// answered or fails, and none waits forever. URLSession's own async methods deadlocked here (the cancel waited
    /// on the session's queue while the queue, completing the request, waited on the cancelled task).
    @Test(arguments: [UInt64(1), 2])
    func requestsCancelledAsTheyCompleteAllEnd(seed: UInt64) async throws {
        let kv = try KeyValueServer()
        kv.values.withLock { $0["k"] = Data("v".utf8) }
        let transport = URLSessionTransport(maxConcurrency: 8)
        let request = HTTPRequest(method: .get, url: kv.url("/kv/k"))
        var random = SeededRandom(seed: seed)
        let yields = (0..<400).map { _ in Int(random.next() % 64) }
        let ended = DispatchSemaphore(value: 0)
        let outcomes = Task {
            defer { ended.signal() }
            return await withTaskGroup(of: Bool.self) { group in
                for count in yields {
                    let call = Task { try await transport.send(request) }
                    group.addTask {
                        for _ in 0..<count { await Task.yield() }
                        call.cancel()
                        return (try? await call.value)?.status == 200
                    }
                }
                return await group.reduce(into: 0) { answered, ok in answered += ok ? 1 : 0 }
            }
        }
        // A deadlock would never end the calls: wait for them off the pool, with a limit.
        let finished = try await offPool { ended.wait(timeout: .now() + 60) == .success }
        #expect(finished, "some cancelled requests never ended")
        guard finished else { return }
        #expect(await outcomes.value <= 400)
        transport.close()
    }

    @Test func fiveHundredGETsShareAFewKeptAliveConnections() async throws {
        let kv = try KeyValueServer()
        kv.server.route("GET /count/{key}") { request in .text(200, request.captures["key"]!) }
        // A little server time per request, so requests overlap as they do against a real provider.
        kv.server.setFaultPlan(HTTPFaultPlan([.latency(milliseconds: 2)]))
        let urlSession = URLSessionTransport(maxConcurrency: 8)
        let probe = TestTransport { try await urlSession.send($0) }
        let http = Harness(transport: probe).client(timeout: nil, maxConcurrency: 8)
        let bodies = await withTaskGroup(of: String.self) { group in
            for index in 0..<500 {
                group.addTask {
                    let response = await start(http, HTTPRequest(method: .get, url: kv.url("/count/k\(index)"))).value
                    return response.value.map { String(decoding: $0.body, as: UTF8.self) } ?? "failed"
                }
            }
            return await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(bodies == Set((0..<500).map { "k\($0)" }))
        let log = kv.server.requestLog
        let connections = Set(log.map(\.connectionID))
        #expect(log.count == 500)
        #expect(probe.maxInFlight == 8, "the limit was reached, never passed")
        // Connections in use at once, as the server saw them: one is in use from its first request to its last. (The
        // server's count of open sockets is no measure: a connection the client has closed stays open there until
        // its thread reads the end, and on a busy machine that came after the client's next connection.)
        #expect(Self.mostInUseAtOnce(log.map(\.connectionID)) <= 8)
        #expect(connections.count <= 100, "\(connections.count) connections")
        #expect(connections.count >= 2, "requests ran side by side")
    }

    /// The most connections whose spans (first request to last, in the order the server received requests)
    /// overlap at one point.
    static func mostInUseAtOnce<Connection: Hashable>(_ connectionOfEachRequest: [Connection]) -> Int {
        var last: [Connection: Int] = [:]
        for (index, connection) in connectionOfEachRequest.enumerated() { last[connection] = index }
        var inUse: Set<Connection> = []
        var most = 0
        for (index, connection) in connectionOfEachRequest.enumerated() {
            inUse.insert(connection)
            most = max(most, inUse.count)
            if last[connection] == index { inUse.remove(connection) }
        }
        return most
    }

    @Test func connectionsInUseAtOnceAreCountedFromTheirSpans() {
        #expect(Self.mostInUseAtOnce([Int]()) == 0)
        #expect(Self.mostInUseAtOnce([1, 1, 2, 2, 3]) == 1)
        #expect(Self.mostInUseAtOnce([1, 2, 1, 3, 2, 3]) == 2)
        #expect(Self.mostInUseAtOnce([1, 2, 3, 1, 4, 2, 3]) == 3)
    }

    @Test func eachTransportHasItsOwnSessionAndReleasingItClosesItsConnections() async throws {
        let kv = try KeyValueServer()
        kv.values.withLock { $0["a"] = Data("A".utf8) }
        do {
            let one = Harness().client()
            let two = Harness().client()
            for http in [one, two, one, two] {
                #expect(await start(http, HTTPRequest(method: .get, url: kv.url("/kv/a"))).value.value?.status == 200)
            }
            let connections = kv.server.requestLog.map(\.connectionID)
            #expect(connections[0] == connections[2] && connections[1] == connections[3], "each kept its connection")
            #expect(connections[0] != connections[1], "the providers share no session")
            withExtendedLifetime((one, two)) { #expect(kv.server.openConnectionCount == 2) }
        }
        try await waitUntil { kv.server.openConnectionCount == 0 }
    }

    @Test func closingTheTransportClosesItsConnectionsAndRefusesMoreRequests() async throws {
        let kv = try KeyValueServer()
        let transport = URLSessionTransport()
        let http = Harness(transport: transport).client()
        #expect(await start(http, HTTPRequest(method: .get, url: kv.url("/kv/a"))).value.value?.status == 404)
        #expect(kv.server.openConnectionCount == 1)
        transport.close()
        transport.close()
        try await waitUntil { kv.server.openConnectionCount == 0 }
        let error = await start(http, HTTPRequest(method: .get, url: kv.url("/kv/a"))).value.error
        #expect(error?.code == .closed)
        #expect(error?.provider == "p1")
        #expect(kv.server.requestLog.count == 1)
    }

    // MARK: Streaming

    @Test func severalMiBStreamFromAFileAndToAFileByteForByte() async throws {
        let kv = try KeyValueServer()
        let directory = try TemporaryDirectory()
        var generator = SystemRandomNumberGenerator()
        let size = 6 * 1024 * 1024 + 17
        let value = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let source = URL(fileURLWithPath: directory.file("up.bin"))
        try value.write(to: source)
        let harness = Harness()
        let http = harness.client()

        let put = HTTPRequest(method: .put, url: kv.url("/kv/blob"), uploadFile: source)
        #expect(await start(http, put).value.value?.status == 204)
        #expect(kv.values.withLock { $0["blob"] } == value)

        let destination = URL(fileURLWithPath: directory.file("down.bin"))
        let get = HTTPRequest(method: .get, url: kv.url("/kv/blob"), downloadFile: destination)
        let response = try #require(await start(http, get).value.value)
        #expect(response.status == 200)
        #expect(response.bodyFile == destination)
        #expect(response.body.isEmpty, "the value went to the file, not memory")
        #expect(try Data(contentsOf: destination) == value)

        // A 404 to a download keeps its reason in memory and leaves no file.
        let missing = HTTPRequest(
            method: .get, url: kv.url("/kv/none"), downloadFile: URL(fileURLWithPath: directory.file("none.bin")))
        let notFound = try #require(await start(http, missing).value.value)
        #expect(notFound.status == 404)
        #expect(notFound.body == Data("no key".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory.file("none.bin")))

        #expect(harness.metrics.reading.bytesWritten == size)
        #expect(harness.metrics.reading.bytesRead == size + 6)
        #expect(kv.server.requestLog.map(\.bodySize) == [size, 0, 0])
    }
}
