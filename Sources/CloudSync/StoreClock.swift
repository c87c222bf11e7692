import Foundation

/// Where the store gets the time, so deadlines, backoff and ages can be tested without sleeping.
public protocol StoreClock: Sendable {
    /// Milliseconds since 1970-01-01 UTC.
    func nowMilliseconds() -> Int64
    /// Suspends for `duration`; throws `CancellationError` when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock.
public struct SystemClock: StoreClock {
    public init() {}

    public func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
