import CloudSync
import Foundation

/// When and how long to wait before sending a request again.
///
/// Retries HTTP 429, 500, 502, 503, 504 and transient network failures, with exponential backoff and full jitter
/// (a uniformly random wait between zero and `base * 2^retry`, capped), unless the server said how long to wait
/// (`Retry-After` in seconds or as an HTTP date, or the provider's own hint in the body), which is honoured as given.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included; 1 never retries.
    public var maxAttempts: Int
    /// The backoff's first ceiling.
    public var baseDelay: Duration
    /// The backoff's largest ceiling.
    public var maxDelay: Duration
    /// The longest server-requested wait this layer sits out; a longer one gives up at once and leaves the wait to
    /// the outbox through `retryAfterMs`.
    public var maxServerDelay: Duration
    /// Statuses worth sending again.
    public var retryableStatuses: Set<Int>
    /// A uniformly distributed number in `0..<1`; injected so tests know the jitter.
    public var random: @Sendable () -> Double
    /// A provider's own wait hint read from an answer (CloudKit's `retryAfter` seconds in the JSON body), consulted
    /// when the answer has no `Retry-After` header.
    public var hint: @Sendable (HTTPResponse) -> Duration?

    /// A policy; the defaults suit the REST providers.
    public init(
        maxAttempts: Int = 5, baseDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(20),
        maxServerDelay: Duration = .seconds(60), retryableStatuses: Set<Int> = [429, 500, 502, 503, 504],
        random: @escaping @Sendable () -> Double = { Jitter.next() },
        hint: @escaping @Sendable (HTTPResponse) -> Duration? = { _ in nil }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxServerDelay = maxServerDelay
        self.retryableStatuses = retryableStatuses
        self.random = random
        self.hint = hint
    }

    /// The jittered backoff before retry number `retry` (1 for the first retry).
    public func backoff(retry: Int) -> Duration {
        let base = baseDelay.milliseconds
        let ceiling = min(maxDelay.milliseconds, base << min(max(0, retry - 1), 30))
        let fraction = min(max(random(), 0), 1)
        return .milliseconds(Int64((Double(ceiling) * fraction).rounded(.down)))
    }

    /// The wait `response` asks for: its `Retry-After` header (seconds or an IMF-fixdate, measured from `now`
    /// in milliseconds since 1970), else the provider's hint; nil when it asks for none.
    public func serverDelay(_ response: HTTPResponse, now: Int64) -> Duration? {
        if let value = response.headers["Retry-After"], let delay = Self.parseRetryAfter(value, now: now) {
            return delay
        }
        return hint(response)
    }

    /// A `Retry-After` value as a wait from `now` (milliseconds since 1970): delay-seconds, or an HTTP date
    /// (IMF-fixdate, RFC 9110 §5.6.7), a past date meaning no wait; nil when it is neither.
    public static func parseRetryAfter(_ value: String, now: Int64) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(trimmed), seconds >= 0 { return .seconds(seconds) }
        guard let date = parseIMFFixdate(trimmed) else { return nil }
        return .milliseconds(max(0, date - now))
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as milliseconds since 1970, or nil.
    public static func parseIMFFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let days = ["Mon,", "Tue,", "Wed,", "Thu,", "Fri,", "Sat,", "Sun,"]
        guard parts.count == 6, days.contains(String(parts[0])), parts[5] == "GMT", parts[1].count == 2,
            let day = Int64(parts[1]), let monthIndex = months.firstIndex(of: String(parts[2])),
            parts[3].count == 4, let year = Int64(parts[3])
        else { return nil }
        let time = parts[4].split(separator: ":")
        guard parts[4].count == 8, time.count == 3, let hour = Int64(time[0]), let minute = Int64(time[1]),
            let second = Int64(time[2]), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let days1970 = UTCTimestamp.daysSinceEpoch(year: year, month: Int64(monthIndex) + 1, day: day)
        return ((days1970 * 24 + hour) * 60 + minute) * 60_000 + second * 1000
    }

    /// A hint reading a number of seconds from the top-level field `field` of a JSON body, as CloudKit Web Services
    /// sends `retryAfter` with `THROTTLED` and `TRY_AGAIN_LATER`.
    public static func jsonSecondsHint(field: String = "retryAfter") -> @Sendable (HTTPResponse) -> Duration? {
        { response in
            guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
                let number = object[field] as? NSNumber, number.doubleValue >= 0
            else { return nil }
            return .milliseconds(Int64((number.doubleValue * 1000).rounded(.up)))
        }
    }
}

/// Sends a request again while the failure may pass, as ``RetryPolicy`` says, on the injected clock.
///
/// Never waits past the request's deadline: when its own backoff would, it gives up with `ERR_TIMEOUT`; when the
/// server asked for a wait that would, with the answer's error (`ERR_RATE_LIMITED` for a 429) and that wait. Never
/// replays a request that is not idempotent unless it is marked safe, and when it gives up on a retryable answer
/// throws the mapped error carrying the last server-requested wait as `retryAfterMs`, so the outbox waits at least
/// that long. A non-retryable answer is
/// returned as it is. Counts retries and throttled answers (429) in the provider's metrics.
public struct RetryLayer: HTTPTransport {
    /// The layer below.
    public let next: any HTTPTransport
    /// When to retry.
    public let policy: RetryPolicy
    /// Where backoff sleeps.
    public let clock: any StoreClock
    /// Where retries and throttled answers are counted.
    public let metrics: ProviderMetrics
    /// How the service names its errors, for the context of the error it gives up with.
    public let serviceErrors: ServiceErrorReader

    /// `policy` on `clock` over `next`.
    public init(
        next: any HTTPTransport, policy: RetryPolicy, clock: any StoreClock,
        metrics: ProviderMetrics = ProviderMetrics(), serviceErrors: ServiceErrorReader = .none
    ) {
        self.next = next
        self.policy = policy
        self.clock = clock
        self.metrics = metrics
        self.serviceErrors = serviceErrors
    }

    public func close() { next.close() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var attempt = 1
        var lastHintMs: Int?
        while true {
            let failure: CloudSyncError
            var serverDelay: Duration?
            do {
                let response = try await next.send(request)
                if response.status == 429 { metrics.recordThrottled() }
                guard policy.retryableStatuses.contains(response.status) else { return response }
                serverDelay = policy.serverDelay(response, now: clock.nowMilliseconds())
                if let serverDelay { lastHintMs = Int(serverDelay.milliseconds) }
                failure = HTTPErrorMapping.error(for: response, to: request, serviceErrors: serviceErrors)
            } catch {
                let mapped = HTTPErrorMapping.error(for: error, sending: request)
                guard HTTPErrorMapping.isTransient(error), mapped.code != .cancelled else { throw mapped }
                failure = mapped
            }
            func giveUp(_ why: String) -> CloudSyncError {
                CloudSyncError(
                    failure.code, failure.message + " (\(why))", provider: failure.provider, key: failure.key,
                    retryAfterMs: lastHintMs, context: failure.context)
            }
            guard request.mayRetry else { throw giveUp("not retried: \(request.method) is not idempotent") }
            guard attempt < policy.maxAttempts else { throw giveUp("gave up after \(attempt) attempts") }
            if let serverDelay, serverDelay > policy.maxServerDelay {
                throw giveUp("the provider asked to wait \(serverDelay.milliseconds) ms")
            }
            let delay = serverDelay ?? policy.backoff(retry: attempt)
            if let deadline = request.deadlineMilliseconds, clock.nowMilliseconds() + delay.milliseconds >= deadline {
                // The provider named its wait: its code and hint tell the outbox more than a timeout would.
                if serverDelay != nil {
                    throw giveUp("the provider asked to wait \(delay.milliseconds) ms, past the deadline")
                }
                throw CloudSyncError(
                    .timeout,
                    failure.message + " (out of time: the next attempt would start after the deadline; "
                        + "raise timeoutMs or try again later)", provider: failure.provider, key: failure.key,
                    retryAfterMs: lastHintMs, context: failure.context)
            }
            do {
                try await clock.sleep(for: delay)
                metrics.recordWait(milliseconds: delay.milliseconds)
            } catch {
                throw HTTPErrorMapping.error(for: CancellationError(), sending: request)
            }
            metrics.recordRetry()
            attempt += 1
        }
    }
}
