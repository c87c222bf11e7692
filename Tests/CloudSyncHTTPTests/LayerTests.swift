import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Adds `Bearer token<n>`; each refresh moves to the next token.
final class CountingAuthenticator: HTTPAuthenticator {
    let refreshes = Counter()
    let canRefresh: Bool
    init(canRefresh: Bool = true) { self.canRefresh = canRefresh }

    func authorize(_ request: inout HTTPRequest) async throws {
        request.headers["Authorization"] = "Bearer token\(refreshes.value)"
    }

    func refresh(after response: HTTPResponse) async throws -> Bool {
        guard canRefresh else { return false }
        refreshes.next()
        return true
    }
}

@Suite struct AuthTests {
    @Test func a401RefreshesOnceAndSendsAgainWithTheNewToken() async {
        let transport = TestTransport(script: [.success(.text(401)), .success(.text(200))])
        let auth = CountingAuthenticator()
        let result = await start(client(transport, clock: ManualClock(), authenticator: auth), request()).value
        #expect(result.value?.status == 200)
        #expect(auth.refreshes.value == 1)
        #expect(transport.requests.map { $0.headers["Authorization"] } == ["Bearer token0", "Bearer token1"])
    }

    @Test func a401AfterTheRefreshIsNotSignedIn() async {
        let transport = TestTransport(script: [.success(.text(401)), .success(.text(401)), .success(.text(200))])
        let auth = CountingAuthenticator()
        let result = await start(client(transport, clock: ManualClock(), authenticator: auth), request()).value
        #expect(result.error?.code == .notSignedIn)
        #expect(result.error?.message.contains("after a refresh") == true)
        #expect(auth.refreshes.value == 1)
        #expect(transport.requests.count == 2)
    }

    @Test func aRefusedRefreshIsNotSignedInWithoutResending() async {
        let transport = TestTransport(script: [.success(.text(401)), .success(.text(200))])
        let auth = CountingAuthenticator(canRefresh: false)
        let result = await start(client(transport, clock: ManualClock(), authenticator: auth), request()).value
        #expect(result.error?.code == .notSignedIn)
        #expect(transport.requests.count == 1)
    }
}

@Suite struct ErrorMappingTests {
    @Test(arguments: [
        (400, ErrorCode.provider), (403, .provider), (404, .provider), (409, .provider), (401, .notSignedIn),
        (429, .rateLimited), (500, .server), (502, .server), (503, .server), (504, .server), (507, .quotaExceeded),
    ])
    func statuses(status: Int, code: ErrorCode) {
        let error = HTTPErrorMapping.error(
            for: .text(status, "  the\nreason\u{0}  here "), to: request(.put, "/v1/items/a"))
        #expect(error.code == code)
        #expect(error.message.hasPrefix("PUT /v1/items/a answered HTTP \(status): the reason here"))
    }

    @Test(arguments: [
        (URLError.Code.cannotConnectToHost, ErrorCode.offline), (.cannotFindHost, .offline),
        (.dnsLookupFailed, .offline), (.notConnectedToInternet, .offline), (.networkConnectionLost, .offline),
        (.timedOut, .timeout), (.cancelled, .cancelled), (.badURL, .provider), (.badServerResponse, .provider),
    ])
    func transportFailures(failure: URLError.Code, code: ErrorCode) {
        #expect(HTTPErrorMapping.error(for: URLError(failure), sending: request()).code == code)
    }

    @Test func cancellationAndOtherErrors() {
        #expect(HTTPErrorMapping.error(for: CancellationError(), sending: request()).code == .cancelled)
        struct Odd: Error {}
        #expect(HTTPErrorMapping.error(for: Odd(), sending: request()).code == .provider)
    }

    @Test func theTransportsReasonIsKeptWithCredentialsStruck() {
        let sentinel = RedactionTests.sentinel
        let sent = HTTPRequest(
            method: .get, url: URL(string: "https://api.example.test/v1/x?access_token=\(sentinel)")!)
        let failure = URLError(
            .unknown,
            userInfo: [NSLocalizedDescriptionKey: "SSL certificate problem for \(sent.url.absoluteString)\n"])
        let error = HTTPErrorMapping.error(for: failure, sending: sent)
        #expect(error.code == .provider)
        #expect(!error.message.contains(sentinel))
        #expect(error.message.contains("failed with URLError -1: SSL certificate problem for https://api.example.test"))
        #expect(error.message.contains("update-ca-certificates"))
        #expect(!HTTPErrorMapping.error(for: URLError(.badURL), sending: sent).message.contains("trust store"))
    }

    @Test func aLongBodyIsCutShort() {
        let error = HTTPErrorMapping.error(for: .text(400, String(repeating: "x", count: 5000)), to: request())
        #expect(error.message.count < 300)
    }

    @Test func theDeadlineIsATimeout() async throws {
        let clock = ManualClock()
        let transport = TestTransport { _ in
            try await clock.sleep(for: .seconds(60))
            return .text(200)
        }
        let task = start(client(transport, clock: clock, timeout: .seconds(5)), request())
        try await clock.waitForSleepers(2)
        clock.advance(by: .seconds(5))
        let error = await task.value.error
        #expect(error?.code == .timeout)
        #expect(error?.message.contains("within 5000 ms") == true)
    }
}

@Suite struct RedactionTests {
    static let sentinel = "SENTINEL-9f8e7d6c5b4a"

    @Test func aSentinelTokenNeverAppearsInLogsErrorsOrDescriptions() async {
        let sentinel = Self.sentinel
        let sink = LogSink()
        var sent = HTTPRequest(
            method: .get,
            url: URL(
                string:
                    "https://api.example.test/v1/x?access_token=\(sentinel)&ckAPIToken=\(sentinel)"
                    + "&ckWebAuthToken=\(sentinel)&X-Amz-Signature=\(sentinel)&X-Amz-Credential=\(sentinel)"
                    + "&key=\(sentinel)&token=\(sentinel)&page=2")!)
        sent.headers["Authorization"] = "Bearer \(sentinel)"
        sent.headers["Cookie"] = "session=\(sentinel)"
        let transport = TestTransport(script: [
            .success(
                .text(
                    400, #"{"error":"bad token \#(sentinel)"}"#,
                    headers: ["Set-Cookie": "session=\(sentinel)"]))
        ])
        let http = client(transport, clock: ManualClock(), logger: sink.logger)
        let response = await start(http, sent).value.value
        #expect(response?.status == 400)
        let error = HTTPErrorMapping.error(for: response!, to: sent)
        let texts =
            sink.all + [
                error.description, sent.description, response!.description, String(describing: sent),
                HTTPErrorMapping.error(for: URLError(.cannotConnectToHost), sending: sent).description,
            ]
        for text in texts { #expect(!text.contains(sentinel), "\(text)") }
        #expect(sink.all.count == 1)
        #expect(sink.all.first?.contains("GET /v1/x?access_token=<redacted>") == true)
        #expect(sink.all.first?.contains("page=2 -> 400") == true)
        #expect(error.message.contains("bad token <redacted>"))
    }
}

@Suite struct CancellationAndConcurrencyTests {
    @Test func cancellingTheCallerReleasesItAtOnce() async throws {
        let clock = ManualClock()
        let transport = TestTransport { _ in
            try await clock.sleep(for: .seconds(3600))
            return .text(200)
        }
        let task = start(client(transport, clock: clock), request())
        try await clock.waitForSleepers(2)
        task.cancel()
        #expect(await task.value.error?.code == .cancelled)
    }

    @Test func aTransportIgnoringCancellationStillReleasesTheCaller() async throws {
        let clock = ManualClock()
        let stuck = ManualClock()
        let transport = TestTransport { _ in
            // A detached wait is not cancelled with the caller, like a hung socket.
            await Task.detached { try? await stuck.sleep(for: .seconds(1)) }.value
            return .text(200)
        }
        let task = start(client(transport, clock: clock), request())
        try await stuck.waitForSleepers(1)
        task.cancel()
        #expect(await task.value.error?.code == .cancelled)
        stuck.advance(by: .seconds(1))
    }

    @Test func noMoreThanMaxConcurrencyRequestsAreInFlight() async throws {
        let clock = ManualClock()
        let server = ManualClock()
        let transport = TestTransport { _ in
            try await server.sleep(for: .seconds(1))
            return .text(200)
        }
        let http = client(transport, clock: clock, timeout: nil, maxConcurrency: 3)
        let done = Counter()
        let total = 50
        for _ in 0..<total {
            Task {
                _ = try? await http.send(request())
                done.next()
            }
        }
        while done.value < total {
            try await waitUntil { server.sleeperCount == min(3, total - done.value) }
            #expect(transport.inFlight == min(3, total - done.value))
            let before = done.value
            server.advance(by: .seconds(1))
            try await waitUntil { done.value >= min(total, before + 3) }
        }
        #expect(transport.maxInFlight == 3)
        #expect(transport.requests.count == total)
    }

    /// A provider's batch starts every request at once and the limit paces them; a request's timeout is its own
    /// time, so one waiting behind its siblings is not timed out before it was sent (an S3 batch of 1,000 on a slow
    /// endpoint failed whole so).
    @Test func aRequestsTimeoutDoesNotRunWhileItWaitsForASlot() async throws {
        let clock = ManualClock()
        let server = ManualClock()
        let transport = TestTransport { _ in
            try await server.sleep(for: .milliseconds(600))
            return .text(200)
        }
        let http = client(transport, clock: clock, timeout: .seconds(1), maxConcurrency: 1)
        let answered = Counter()
        let sends = (0..<3).map { _ in
            Task {
                defer { answered.next() }
                return await start(http, request()).value
            }
        }
        for sent in 1...3 {
            // Until the request is sent, or every call has come back (the ones timed out before being sent, too).
            try await waitUntil {
                (server.sleeperCount == 1 && transport.requests.count == sent) || answered.value == sends.count
            }
            // Each request takes 0.6 s once sent: within its 1 s, though the third is answered 1.8 s after the call.
            clock.advance(by: .milliseconds(600))
            server.advance(by: .milliseconds(600))
        }
        for send in sends {
            let result = await send.value
            #expect(result.value?.status == 200, "\(result.error.map { "\($0.code)" } ?? "answered")")
        }
    }

    @Test func aCancelledWaiterLeavesTheSemaphore() async throws {
        let semaphore = AsyncSemaphore(limit: 1)
        try await semaphore.acquire()
        let waiter = Task { try await semaphore.acquire() }
        await Task.yield()
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        semaphore.release()
        try await semaphore.acquire()
    }
}

@Suite struct CounterAndStreamingTests {
    @Test func eachRequestIsCountedOnceWithItsBytes() async throws {
        let clock = ManualClock()
        let metrics = ProviderMetrics()
        let transport = TestTransport(script: [.success(.text(500, "oops")), .success(.text(200, "hello"))])
        let task = start(client(transport, clock: clock, metrics: metrics), request(.put, body: "abc"))
        try await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(100))
        #expect(await task.value.value?.status == 200)
        let reading = metrics.reading
        #expect(reading.requests == 2)
        #expect(reading.bytesWritten == 6)
        #expect(reading.bytesRead == 9)
        #expect(reading.retries == 1)
        #expect(reading.throttled == 0)
    }

    @Test func uploadsFromAndDownloadsToFiles() async throws {
        let directory = try TemporaryDirectory()
        let source = URL(fileURLWithPath: directory.file("up.bin"))
        try Data(repeating: 7, count: 4096).write(to: source)
        let metrics = ProviderMetrics()
        let transport = TestTransport(script: [.success(.text(200)), .success(.text(200, "downloaded"))])
        let http = client(transport, clock: ManualClock(), metrics: metrics)
        var upload = request(.put, "/v1/blob")
        upload.uploadFile = source
        _ = await start(http, upload).value
        #expect(transport.requests.first?.uploadFile == source)
        #expect(transport.requests.first?.bodySize == 4096)

        var download = request(.get, "/v1/blob")
        download.downloadFile = URL(fileURLWithPath: directory.file("down.bin"))
        let response = await start(http, download).value.value
        #expect(response?.bodyFile == download.downloadFile)
        #expect(try String(contentsOfFile: directory.file("down.bin"), encoding: .utf8) == "downloaded")
        #expect(metrics.reading.bytesWritten == 4096)
        #expect(metrics.reading.bytesRead == 10)
    }
}

@Suite struct URLSessionTransportTests {
    /// A port that refuses connections for as long as the returned socket is open: bound but never listening, so no
    /// other server (the emulators other suites start at the same time) can take it over, as it could a port that was
    /// bound and closed again.
    static func refusingPort() -> (socket: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                _ = bind(fd, pointer, length)
                return getsockname(fd, pointer, &length)
            }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test func aClosedPortIsOfflineForDataUploadAndDownload() async throws {
        let directory = try TemporaryDirectory()
        let file = URL(fileURLWithPath: directory.file("f"))
        try Data("x".utf8).write(to: file)
        let refusing = Self.refusingPort()
        defer { close(refusing.socket) }
        let url = URL(string: "http://127.0.0.1:\(refusing.port)/v1/x?access_token=\(RedactionTests.sentinel)")!
        let policy = RetryPolicy(maxAttempts: 1)
        let http = HTTPClient(
            transport: URLSessionTransport(maxConcurrency: 2), context: ProviderContext(providerID: "p1"),
            retryPolicy: policy, timeout: .seconds(20))
        var requests = [HTTPRequest(method: .get, url: url), HTTPRequest(method: .get, url: url, downloadFile: file)]
        requests.append(HTTPRequest(method: .put, url: url, uploadFile: file))
        requests.append(HTTPRequest(method: .put, url: url, body: Data("abc".utf8)))
        for sent in requests {
            let error = await start(http, sent).value.error
            #expect(error?.code == .offline)
            #expect(error?.description.contains(RedactionTests.sentinel) == false)
        }
    }
}
