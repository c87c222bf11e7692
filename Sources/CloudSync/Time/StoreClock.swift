import Foundation

/// Where the store gets the time, so deadlines, backoff and ages can be tested without sleeping.
public protocol StoreClock: Sendable {
    /// Milliseconds since 1970-01-01 UTC.
    func nowMilliseconds() -> Int64
    /// Suspends for `duration`; throws `CancellationError` when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
    /// Runs `action` once `delay` has passed, unless cancelled first. The timer exists when this returns, so a
    /// deadline is in place before the work it guards starts.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction
}

extension StoreClock {
    /// A timer built on ``sleep(for:)``, so a clock need implement only the time and sleeping.
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let timer = Task {
            do {
                try await sleep(for: delay)
            } catch {
                return
            }
            action()
        }
        return ScheduledAction { timer.cancel() }
    }
}

/// A timer from ``StoreClock/schedule(after:_:)``; `cancel()` stops it if it has not fired.
public final class ScheduledAction: Sendable {
    private let onCancel: @Sendable () -> Void

    /// A timer handle whose cancellation runs `onCancel`, for clocks of one's own.
    public init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = onCancel }

    /// Stops the timer; harmless after it fired.
    public func cancel() { onCancel() }
}

/// The real clock.
public struct SystemClock: StoreClock {
    /// The wall clock.
    public init() {}

    /// Wall-clock milliseconds since 1970, as outbox entries and reports record them.
    public func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// Sleeps on the task, so cancelling the task ends it.
    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    /// A timer on the clock's one timer thread (`TimerThread`); `action` runs on that thread and must be short.
    ///
    /// Arming and cancelling it start no task and usually wake no thread, which matters because every provider call
    /// the store makes arms one (its deadline) and nearly every one is cancelled.
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let entry = TimerThread.shared.schedule(after: delay, action)
        return ScheduledAction { TimerThread.shared.cancel(entry) }
    }
}
