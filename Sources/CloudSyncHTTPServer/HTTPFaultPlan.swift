import CloudSync
import CloudSyncHTTP

/// Misbehaviour for ``LoopbackHTTPServer`` to show, as rules tried in order on every request.
///
/// It is a plain value and reads from JSON, so an emulator can load it from a file:
///
/// ```json
/// {"rules": [
///   {"route": "GET /drive/v3/files/{id}", "calls": [3, 4], "status": 503},
///   {"rate": 0.2, "seed": 7, "status": 500},
///   {"afterCalls": 10, "status": 401},
///   {"status": 429, "retryAfterSeconds": 2},
///   {"latencyMs": 150},
///   {"calls": [1], "hang": true},
///   {"calls": [2], "resetMidBody": true}
/// ]}
/// ```
///
/// A rule without `route` covers every request, unrouted ones included; without `calls`, `rate` or `afterCalls` it
/// fires on every request it covers.
public struct HTTPFaultPlan: Sendable, Equatable, Codable {
    /// The rules, tried in order.
    public var rules: [HTTPFaultRule]

    /// A plan of `rules`; the empty plan injects nothing.
    public init(_ rules: [HTTPFaultRule] = []) {
        self.rules = rules
    }
}

/// Which requests a rule covers, on which of them it fires, and what it does then.
///
/// Each rule counts the requests it covers from the moment its plan is set (the first is call 1); the counts and the
/// random source start again whenever a plan is set. Every covering rule counts every request, even one an earlier
/// rule answered. Latency rules add up; the first firing rule of any other kind answers the request.
public struct HTTPFaultRule: Sendable, Equatable, Codable {
    /// On which covered calls a rule fires.
    public enum Trigger: Sendable, Equatable {
        /// Every call.
        case always
        /// These calls (1-based), e.g. `[3, 4]`.
        case calls([Int])
        /// Each call with probability `rate`, drawn from a random source seeded with `seed`, so a run repeats.
        case rate(Double, seed: UInt64)
        /// Every call after the first `count`.
        case afterCalls(Int)
    }

    /// What a firing rule does.
    public enum Action: Sendable, Equatable {
        /// Answers with this status and a JSON error body.
        case status(Int)
        /// Answers 429 with `Retry-After` in whole seconds.
        case tooManyRequests(retryAfterSeconds: Int)
        /// Waits this long before the request goes on (to later rules and the handler).
        case latency(milliseconds: Int)
        /// Never answers: holds the connection open until the client closes it or the server stops.
        case hang
        /// Sends the handler's status line, headers and half its body, then resets the connection (RST).
        case resetMidBody
    }

    /// The route covered (as registered, compared by method and segments); nil covers every request.
    public var route: HTTPRoutePattern?
    /// When the rule fires.
    public var trigger: Trigger
    /// What it does then.
    public var action: Action

    /// A rule doing `action` on the calls `trigger` picks among those to `route` (nil: all requests).
    public init(route: HTTPRoutePattern? = nil, trigger: Trigger = .always, action: Action) {
        self.route = route
        self.trigger = trigger
        self.action = action
    }

    /// Answers `status` on exactly the given calls ("calls 3 and 4 get 503").
    public static func errors(
        _ status: Int = 503, onCalls calls: [Int], route: HTTPRoutePattern? = nil
    ) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: .calls(calls), action: .status(status))
    }

    /// Answers `status` on a seeded, repeatable share `rate` (0...1) of calls.
    public static func errorRate(
        _ rate: Double, seed: UInt64, status: Int = 503, route: HTTPRoutePattern? = nil
    ) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: .rate(rate, seed: seed), action: .status(status))
    }

    /// Answers 429 with `Retry-After: retryAfterSeconds` on the calls `trigger` picks.
    public static func tooManyRequests(
        retryAfterSeconds: Int, on trigger: Trigger = .always, route: HTTPRoutePattern? = nil
    ) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: trigger, action: .tooManyRequests(retryAfterSeconds: retryAfterSeconds))
    }

    /// Delays the calls `trigger` picks by `milliseconds` before answering them normally.
    public static func latency(
        milliseconds: Int, on trigger: Trigger = .always, route: HTTPRoutePattern? = nil
    ) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: trigger, action: .latency(milliseconds: milliseconds))
    }

    /// Leaves the calls `trigger` picks unanswered until the client gives up or the server stops.
    public static func hang(on trigger: Trigger = .always, route: HTTPRoutePattern? = nil) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: trigger, action: .hang)
    }

    /// Resets the connection part way through the body of the calls `trigger` picks.
    public static func resetMidBody(on trigger: Trigger = .always, route: HTTPRoutePattern? = nil) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: trigger, action: .resetMidBody)
    }

    /// An access token that expires: every call after the first `calls` gets 401 until another plan is set.
    public static func tokenExpiry(afterCalls calls: Int, route: HTTPRoutePattern? = nil) -> HTTPFaultRule {
        HTTPFaultRule(route: route, trigger: .afterCalls(calls), action: .status(401))
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case route, calls, rate, seed, afterCalls, status, retryAfterSeconds, latencyMs, hang, resetMidBody
    }

    /// Any field name, so a misspelt one is refused instead of ignored.
    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Reads the flat JSON form shown on ``HTTPFaultPlan``; refuses an unknown field, and a rule with no action or two.
    public init(from decoder: any Decoder) throws {
        let every = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = every.allKeys.first(where: { CodingKeys(stringValue: $0.stringValue) == nil }) {
            let known = CodingKeys.allCases.map(\.rawValue).joined(separator: ", ")
            throw DecodingError.dataCorruptedError(
                forKey: unknown, in: every,
                debugDescription: "unknown field '\(unknown.stringValue)'; a rule takes \(known)")
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        route = try container.decodeIfPresent(HTTPRoutePattern.self, forKey: .route)

        var triggers: [Trigger] = []
        if let calls = try container.decodeIfPresent([Int].self, forKey: .calls) { triggers.append(.calls(calls)) }
        if let rate = try container.decodeIfPresent(Double.self, forKey: .rate) {
            guard (0...1).contains(rate) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .rate, in: container, debugDescription: "rate must be between 0 and 1")
            }
            triggers.append(.rate(rate, seed: try container.decodeIfPresent(UInt64.self, forKey: .seed) ?? 0))
        }
        if let after = try container.decodeIfPresent(Int.self, forKey: .afterCalls) {
            triggers.append(.afterCalls(after))
        }
        guard triggers.count <= 1 else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: container.codingPath,
                    debugDescription: "a rule takes at most one of calls, rate and afterCalls"))
        }
        trigger = triggers.first ?? .always

        var actions: [Action] = []
        if let status = try container.decodeIfPresent(Int.self, forKey: .status) {
            if let seconds = try container.decodeIfPresent(Int.self, forKey: .retryAfterSeconds) {
                guard status == 429 else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .retryAfterSeconds, in: container,
                        debugDescription: "retryAfterSeconds needs status 429")
                }
                actions.append(.tooManyRequests(retryAfterSeconds: seconds))
            } else {
                actions.append(.status(status))
            }
        }
        if let milliseconds = try container.decodeIfPresent(Int.self, forKey: .latencyMs) {
            actions.append(.latency(milliseconds: milliseconds))
        }
        if try container.decodeIfPresent(Bool.self, forKey: .hang) == true { actions.append(.hang) }
        if try container.decodeIfPresent(Bool.self, forKey: .resetMidBody) == true { actions.append(.resetMidBody) }
        guard actions.count == 1, let action = actions.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: container.codingPath,
                    debugDescription: "a rule takes exactly one of status, latencyMs, hang and resetMidBody"))
        }
        self.action = action
    }

    /// Writes the flat JSON form shown on ``HTTPFaultPlan``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(route, forKey: .route)
        switch trigger {
        case .always: break
        case .calls(let calls): try container.encode(calls, forKey: .calls)
        case .rate(let rate, let seed):
            try container.encode(rate, forKey: .rate)
            try container.encode(seed, forKey: .seed)
        case .afterCalls(let count): try container.encode(count, forKey: .afterCalls)
        }
        switch action {
        case .status(let status): try container.encode(status, forKey: .status)
        case .tooManyRequests(let seconds):
            try container.encode(429, forKey: .status)
            try container.encode(seconds, forKey: .retryAfterSeconds)
        case .latency(let milliseconds): try container.encode(milliseconds, forKey: .latencyMs)
        case .hang: try container.encode(true, forKey: .hang)
        case .resetMidBody: try container.encode(true, forKey: .resetMidBody)
        }
    }
}
