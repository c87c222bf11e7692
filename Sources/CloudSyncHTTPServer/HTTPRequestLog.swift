import CloudSyncHTTP
import Foundation

/// One request as ``LoopbackHTTPServer`` saw and answered it.
public struct HTTPLogEntry: Sendable {
    /// Arrival number over the server's life (0 first); not reset by ``LoopbackHTTPServer/clearLog()``.
    public let sequence: Int
    /// The connection it came on (1 first); equal ids mean a kept-alive connection was reused.
    public let connectionID: Int
    /// The method as sent.
    public let method: String
    /// The path as sent, without the query, still percent-encoded (taken out of an absolute-form target).
    public let path: String
    /// The request target exactly as the request line carried it: `/a?b` (origin form), `http://host:port/a?b`
    /// (absolute form, what a client sends to a proxy) or `host:port` (a proxy's `CONNECT`).
    public let target: String
    /// The decoded query items.
    public let queryItems: [URLQueryItem]
    /// The request headers.
    public let headers: HTTPHeaders
    /// The body's length after chunked decoding.
    public let bodySize: Int
    /// The route it matched, nil when none did (it got a 404).
    public let route: HTTPRoutePattern?
    /// The status sent; nil while it is being answered, and for good when it hung or the server stopped first.
    public internal(set) var status: Int?
    /// The bytes of response body sent (half the body for a reset mid-body, none for `HEAD`); nil while unanswered.
    public internal(set) var responseBodySize: Int?
    /// The injected fault that answered it (never `latency`), or nil when its handler or the 404 did.
    public internal(set) var fault: HTTPFaultRule.Action?
    /// Latency injected before it was answered, in milliseconds (0 for none).
    public internal(set) var latencyMilliseconds: Int

    /// Whether an injected fault, not the handler, answered it.
    public var answeredByFault: Bool { fault != nil }
}

/// What one route (or the unrouted requests) has seen since the log was last cleared.
public struct HTTPRouteCounters: Sendable, Equatable {
    /// Requests that arrived.
    public var requests = 0
    /// Of those, how many an injected fault answered.
    public var faults = 0
    /// How many got each status (hung requests are in none).
    public var statuses: [Int: Int] = [:]

    /// Counters at zero.
    public init() {}
}
