import CloudSync
import Foundation
import Synchronization

/// Sends one request and returns the answer, whatever its status.
///
/// Requirements every conformance meets:
/// - Any status is an answer, not an error: a 404 or a 503 returns normally. Only a failure to get an answer throws.
/// - Cancelling the calling task ends the call promptly with `CancellationError` or `URLError(.cancelled)`.
/// - A request with ``HTTPRequest/uploadFile`` sends that file's bytes as the body; one with
///   ``HTTPRequest/downloadFile`` writes a 2xx body to that file and returns it as ``HTTPResponse/bodyFile``.
///
/// The layers (``ConcurrencyLimitLayer``, ``DeadlineLayer``, ``RetryLayer``, ``AuthLayer``, ``RequestMeteringLayer``)
/// conform too, each wrapping the next, so any of them can be tested alone over a test transport.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
    /// Releases what the transport holds (a session, its kept-alive connections); later requests fail with
    /// `ERR_CLOSED`. A layer closes the layer below it. Closing twice does nothing more.
    func close()
}

extension HTTPTransport {
    /// Nothing to release: the default for transports that hold no connections.
    public func close() {}
}

/// Enforces the operation's deadline by racing it against the clock: URLSession's own timeouts are idle-only, so a
/// trickling server would otherwise hold the caller forever.
///
/// Sets ``HTTPRequest/deadlineMilliseconds`` (from `timeout` when the request has none, one per MiB of a file it
/// moves: ``HTTPRequest/transferBytes``) so the layers below know it,
/// and throws `ERR_TIMEOUT` when it passes. The caller is released at the deadline, or at once when cancelled,
/// even if the layers below ignore cancellation.
public struct DeadlineLayer: HTTPTransport {
    /// The layer below.
    public let next: any HTTPTransport
    /// Where time comes from.
    public let clock: any StoreClock
    /// The timeout of a request that carries no deadline; nil lets such a request run unbounded.
    public let timeout: Duration?

    /// A deadline of `timeout` on `clock` over `next`.
    public init(next: any HTTPTransport, clock: any StoreClock, timeout: Duration?) {
        self.next = next
        self.clock = clock
        self.timeout = timeout
    }

    public func close() { next.close() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var request = request
        let now = clock.nowMilliseconds()
        if request.deadlineMilliseconds == nil, let timeout {
            // A file transfer gets one timeout per MiB started.
            let per = HTTPRequest.bytesPerTimeout
            let rounds = request.transferBytes.map { max(1, ($0 + per - 1) / per) } ?? 1
            request.deadlineMilliseconds = now + timeout.milliseconds * rounds
        }
        guard let deadline = request.deadlineMilliseconds else { return try await next.send(request) }
        let remaining = Duration.milliseconds(max(0, deadline - now))
        let sending = request
        let next = self.next
        let timeoutError: @Sendable () -> CloudSyncError = { HTTPErrorMapping.timeout(sending, after: remaining) }
        return try await withDeadline(remaining, clock: clock, timeoutError: timeoutError) {
            try await next.send(sending)
        }
    }
}

/// Signs a request or adds a token, per provider; told when the provider refused the credentials.
public protocol HTTPAuthenticator: Sendable {
    /// Adds what `request` needs to be accepted (an `Authorization` header, a signature, a query token).
    func authorize(_ request: inout HTTPRequest) async throws
    /// Called once when an authorized request got HTTP 401; returns true when new credentials were obtained (an
    /// OAuth refresh) and the request is worth sending once more, false when nothing can be done.
    func refresh(after response: HTTPResponse) async throws -> Bool
    /// What to do when the credentials are refused for good (`run cloudsync login FILE --provider ID`), for the
    /// `ERR_NOT_SIGNED_IN` message; nil when there is nothing to add.
    var signInAdvice: String? { get }
}

extension HTTPAuthenticator {
    /// By default there is no advice beyond signing in again.
    public var signInAdvice: String? { nil }
}

/// Authorizes every request and, on HTTP 401, refreshes the credentials once and sends the request again; a second
/// 401, or a refusal to refresh, throws `ERR_NOT_SIGNED_IN`.
public struct AuthLayer: HTTPTransport {
    /// The layer below.
    public let next: any HTTPTransport
    /// The provider's credentials.
    public let authenticator: any HTTPAuthenticator

    /// How the service names its errors, for the context of the `ERR_NOT_SIGNED_IN` it throws.
    public let serviceErrors: ServiceErrorReader

    /// `authenticator` over `next`.
    public init(
        next: any HTTPTransport, authenticator: any HTTPAuthenticator, serviceErrors: ServiceErrorReader = .none
    ) {
        self.next = next
        self.authenticator = authenticator
        self.serviceErrors = serviceErrors
    }

    public func close() { next.close() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var signed = request
        try await authenticator.authorize(&signed)
        let response = try await next.send(signed)
        guard response.status == 401 else { return response }
        guard try await authenticator.refresh(after: response) else {
            throw notSignedIn(response, signed, refreshed: false)
        }
        var again = request
        try await authenticator.authorize(&again)
        let second = try await next.send(again)
        guard second.status == 401 else { return second }
        throw notSignedIn(second, again, refreshed: true)
    }

    private func notSignedIn(_ response: HTTPResponse, _ request: HTTPRequest, refreshed: Bool) -> CloudSyncError {
        let base = HTTPErrorMapping.error(for: response, to: request, code: .notSignedIn, serviceErrors: serviceErrors)
        let what = refreshed ? "the credentials were refused after a refresh" : "the credentials were refused"
        let advice = authenticator.signInAdvice.map { "; \($0)" } ?? ""
        return base.restated(.notSignedIn, "\(what); \(base.message)\(advice)")
    }
}

/// An authenticator that adds nothing, for providers that need no credentials.
public struct NoAuthentication: HTTPAuthenticator {
    /// Nothing to add.
    public init() {}
    public func authorize(_ request: inout HTTPRequest) async throws {}
    public func refresh(after response: HTTPResponse) async throws -> Bool { false }
}

/// Keeps at most `limit` requests in flight through it; the others wait their turn in order, so 500 requests run
/// on a few connections instead of 500 at once or one at a time.
///
/// It sits above ``DeadlineLayer``: a provider's batch starts all its requests at once and lets this layer pace them,
/// and a request's timeout is the time it takes once it has its turn, not the time it waited behind its siblings.
/// A request keeps its slot while ``RetryLayer`` waits to send it again, so a throttled provider is not sent more at
/// once. Records the time each request waited for its slot in the provider's metrics.
public struct ConcurrencyLimitLayer: HTTPTransport {
    /// The layers below.
    public let next: any HTTPTransport
    /// The semaphore shared by every request of the provider.
    public let semaphore: AsyncSemaphore
    /// Where the time waited for a slot is counted.
    public let metrics: ProviderMetrics
    /// Where durations come from.
    public let clock: any StoreClock

    /// At most `limit` requests in flight over `next`.
    public init(
        next: any HTTPTransport, limit: Int, metrics: ProviderMetrics = ProviderMetrics(),
        clock: any StoreClock = SystemClock()
    ) {
        self.next = next
        self.semaphore = AsyncSemaphore(limit: limit)
        self.metrics = metrics
        self.clock = clock
    }

    public func close() { next.close() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let queued = clock.nowMilliseconds()
        try await semaphore.acquire()
        defer { semaphore.release() }
        metrics.recordWait(milliseconds: clock.nowMilliseconds() - queued)
        return try await next.send(request)
    }
}

/// Counts each request that reaches the transport once in the provider's metrics, by method and status class, with
/// the bytes sent and received, and logs it at debug level: method, redacted path, status, duration, bytes.
///
/// The layer just above the transport, so every attempt a retry makes is one request here, as the server sees it.
public struct RequestMeteringLayer: HTTPTransport {
    /// The layer below (the transport).
    public let next: any HTTPTransport
    /// Where each request is counted.
    public let metrics: ProviderMetrics
    /// Where each request is logged.
    public let logger: ProviderLogger
    /// Where durations come from.
    public let clock: any StoreClock

    /// Counts and logs each request sent over `next`.
    public init(
        next: any HTTPTransport, metrics: ProviderMetrics = ProviderMetrics(), logger: ProviderLogger = .disabled,
        clock: any StoreClock = SystemClock()
    ) {
        self.next = next
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
    }

    public func close() { next.close() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let start = clock.nowMilliseconds()
        let logger = self.logger.redacting(HTTPRedaction.secrets(of: request))
        let line = "\(request.method) \(HTTPRedaction.redactedPath(request.url))"
        do {
            let response = try await next.send(request)
            let elapsed = clock.nowMilliseconds() - start
            metrics.recordHTTPRequest(
                method: request.method.rawValue, status: response.status, bytesRead: response.bodySize,
                bytesWritten: request.bodySize)
            logger.log(
                .debug,
                "\(line) -> \(response.status) in \(elapsed) ms, sent \(request.bodySize) B, "
                    + "received \(response.bodySize) B")
            return response
        } catch {
            let elapsed = clock.nowMilliseconds() - start
            metrics.recordHTTPRequest(method: request.method.rawValue, status: nil, bytesWritten: request.bodySize)
            let mapped = HTTPErrorMapping.error(for: error, sending: request)
            logger.log(.debug, "\(line) -> \(mapped.code) in \(elapsed) ms, sent \(request.bodySize) B")
            throw error
        }
    }
}

/// A counting semaphore for tasks: waiting suspends instead of blocking a thread, waiters are served in order, and a
/// cancelled waiter leaves the queue at once with `CancellationError`.
public final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID = 0
        var cancelledEarly: Set<Int> = []
    }

    private let state: Mutex<State>

    /// A semaphore with `limit` permits (at least one).
    public init(limit: Int) { state = Mutex(State(available: max(1, limit))) }

    /// Takes a permit, waiting for one if none is free.
    public func acquire() async throws {
        try Task.checkCancellation()
        let id: Int? = state.withLock { state in
            if state.available > 0 {
                state.available -= 1
                return nil
            }
            defer { state.nextID += 1 }
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if state.cancelledEarly.remove(id) != nil { return true }
                    state.waiters.append((id: id, continuation: continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Returns a permit, handing it to the longest waiter if there is one.
    public func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        waiter?.resume()
    }
}
