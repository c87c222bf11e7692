import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

@Suite struct RetryTests {
    @Test func retryAfterInSecondsIsHonouredOnTheClock() async throws {
        let clock = ManualClock()
        let metrics = ProviderMetrics()
        let transport = TestTransport(script: [
            .success(.text(429, "slow down", headers: ["Retry-After": "3"])), .success(.text(200, "ok")),
        ])
        let task = start(client(transport, clock: clock, metrics: metrics), request())
        // One sleeper is the deadline's timer, the other the retry's wait.
        try await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(2999))
        #expect(transport.requests.count == 1)
        clock.advance(by: .milliseconds(1))
        let result = await task.value
        #expect(result.value?.status == 200)
        #expect(transport.requests.count == 2)
        #expect(metrics.reading.retries == 1)
        #expect(metrics.reading.throttled == 1)
        #expect(metrics.reading.requests == 2)
    }

    @Test func retryAfterAsAnHTTPDateIsHonoured() async throws {
        let clock = ManualClock()  // 2026-01-01T00:00:00Z, a Thursday
        let transport = TestTransport(script: [
            .success(.text(503, headers: ["Retry-After": "Thu, 01 Jan 2026 00:00:07 GMT"])), .success(.text(204)),
        ])
        let task = start(client(transport, clock: clock), request())
        try await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(6999))
        #expect(transport.requests.count == 1)
        clock.advance(by: .milliseconds(1))
        #expect(await task.value.value?.status == 204)
    }

    @Test func imfFixdateParsesToTheRFCExample() {
        #expect(RetryPolicy.parseIMFFixdate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777_000)
        #expect(RetryPolicy.parseIMFFixdate("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(RetryPolicy.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_787_000) == .zero)
        #expect(RetryPolicy.parseRetryAfter("120", now: 0) == .seconds(120))
        #expect(RetryPolicy.parseRetryAfter("soon", now: 0) == nil)
    }

    @Test func a503BurstBacksOffExponentiallyWithJitterThenSucceeds() async throws {
        let clock = ManualClock()
        let transport = TestTransport(script: [
            .success(.text(503)), .success(.text(502)), .success(.text(504)), .success(.text(200)),
        ])
        let start = clock.nowMilliseconds()
        let task = CloudSyncHTTPTests.start(client(transport, clock: clock), request())
        // Full jitter at one half of 200, 400, 800 ms.
        for (attempts, wait) in [(1, 100), (2, 200), (3, 400)] {
            try await clock.waitForSleepers(2)
            #expect(transport.requests.count == attempts)
            clock.advance(by: .milliseconds(wait - 1))
            #expect(transport.requests.count == attempts)
            clock.advance(by: .milliseconds(1))
            try await waitUntil { transport.requests.count == attempts + 1 }
        }
        #expect(await task.value.value?.status == 200)
        #expect(clock.nowMilliseconds() - start == 700)
    }

    @Test func theDeadlineCutsARetryShortAndTheErrorCarriesTheHint() async {
        let clock = ManualClock()
        let transport = TestTransport(script: [.success(.text(503, headers: ["Retry-After": "5"]))])
        let result = await start(client(transport, clock: clock, timeout: .seconds(2)), request()).value
        #expect(result.error?.code == .server)
        #expect(result.error?.retryAfterMs == 5000)
        #expect(result.error?.provider == "p1")
        #expect(transport.requests.count == 1)
    }

    @Test func aPOSTIsNotReplayedUnlessMarkedSafe() async throws {
        let clock = ManualClock()
        let transport = TestTransport(script: [.success(.text(503))])
        let result = await start(client(transport, clock: clock), request(.post, body: "x")).value
        #expect(result.error?.code == .server)
        #expect(transport.requests.count == 1)

        let safe = TestTransport(script: [.success(.text(503)), .success(.text(201))])
        var marked = request(.post, body: "x")
        marked.isRetrySafe = true
        let task = start(client(safe, clock: clock), marked)
        try await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(100))
        #expect(await task.value.value?.status == 201)
        #expect(safe.requests.count == 2)
    }

    @Test func itGivesUpAfterMaxAttemptsWithTheLastHint() async throws {
        let clock = ManualClock()
        let transport = TestTransport(script: [
            .success(.text(429, headers: ["Retry-After": "1"])), .success(.text(429, headers: ["Retry-After": "2"])),
            .success(.text(429, headers: ["Retry-After": "4"])), .success(.text(200)),
        ])
        let policy = RetryPolicy(maxAttempts: 3, random: { 0.5 })
        let task = start(client(transport, clock: clock, policy: policy), request())
        for wait in [1, 2] {
            try await clock.waitForSleepers(2)
            clock.advance(by: .seconds(wait))
        }
        let error = await task.value.error
        #expect(error?.code == .rateLimited)
        #expect(error?.retryAfterMs == 4000)
        #expect(error?.message.contains("gave up after 3 attempts") == true)
        #expect(transport.requests.count == 3)
    }

    @Test func aServerWaitLongerThanTheLimitIsLeftToTheOutbox() async {
        let clock = ManualClock()
        let transport = TestTransport(script: [.success(.text(429, headers: ["Retry-After": "3600"]))])
        let result = await start(client(transport, clock: clock, timeout: nil), request()).value
        #expect(result.error?.code == .rateLimited)
        #expect(result.error?.retryAfterMs == 3_600_000)
    }

    @Test func cloudKitsRetryAfterInTheBodyIsAHint() async throws {
        let clock = ManualClock()
        let transport = TestTransport(script: [
            .success(.text(503, #"{"serverErrorCode":"TRY_AGAIN_LATER","retryAfter":2}"#)), .success(.text(200)),
        ])
        let policy = RetryPolicy(random: { 0.5 }, hint: RetryPolicy.jsonSecondsHint())
        let task = start(client(transport, clock: clock, policy: policy), request())
        try await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(1999))
        #expect(transport.requests.count == 1)
        clock.advance(by: .milliseconds(1))
        #expect(await task.value.value?.status == 200)
    }

    @Test func transientNetworkFailuresAreRetriedOthersAreNot() async throws {
        let clock = ManualClock()
        let transport = TestTransport(script: [
            .failure(URLError(.networkConnectionLost)), .failure(URLError(.timedOut)), .success(.text(200)),
        ])
        let task = start(client(transport, clock: clock), request())
        for wait in [100, 200] {
            try await clock.waitForSleepers(2)
            clock.advance(by: .milliseconds(wait))
        }
        #expect(await task.value.value?.status == 200)

        let bad = TestTransport(script: [.failure(URLError(.badURL))])
        let result = await start(client(bad, clock: clock), request()).value
        #expect(result.error?.code == .provider)
        #expect(bad.requests.count == 1)
    }

    @Test func aNonRetryableStatusIsReturnedAsIs() async {
        let clock = ManualClock()
        let transport = TestTransport(script: [.success(.text(404, "no such item"))])
        let result = await start(client(transport, clock: clock), request()).value
        #expect(result.value?.status == 404)
        #expect(transport.requests.count == 1)
    }
}
