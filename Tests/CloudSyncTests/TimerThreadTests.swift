import CloudSyncTesting
import Synchronization
import Testing

@testable import CloudSync

/// The system clock's timer thread, on real time: the durations are a few milliseconds, and every wait is for an
/// event, bounded by `waitUntil`'s limit rather than slept.
@Suite struct TimerThreadTests {
    @Test func timersFireInDueOrderAndACancelledOneNever() async throws {
        let timers = TimerThread()
        let fired = Mutex<[Int]>([])
        // The thread first sleeps towards a timer an hour away, so the later ones must wake it.
        let far = timers.schedule(after: .seconds(3600)) { fired.withLock { $0.append(3600) } }
        _ = timers.schedule(after: .milliseconds(30)) { fired.withLock { $0.append(30) } }
        _ = timers.schedule(after: .milliseconds(10)) { fired.withLock { $0.append(10) } }
        let cancelled = timers.schedule(after: .milliseconds(15)) { fired.withLock { $0.append(15) } }
        _ = timers.schedule(after: .milliseconds(20)) { fired.withLock { $0.append(20) } }
        timers.cancel(cancelled)
        try await waitUntil { fired.withLock { $0.count } == 3 }
        #expect(fired.withLock { $0 } == [10, 20, 30])
        timers.cancel(far)
    }

    @Test func cancelledTimersAreDroppedOnceTheyAreTheMajority() async {
        let timers = TimerThread()
        let entries = (0..<10_000).map { _ in timers.schedule(after: .seconds(3600)) {} }
        let live = timers.schedule(after: .seconds(3600)) {}
        for entry in entries { timers.cancel(entry) }
        #expect(timers.pendingCount <= 2049, "\(timers.pendingCount) timers kept for 10,001 armed, 1 live")
        timers.cancel(live)
    }

    @Test func aTimerCancelledAfterItFiredIsHarmless() async throws {
        let timers = TimerThread()
        let count = Mutex(0)
        let entry = timers.schedule(after: .zero) { count.withLock { $0 += 1 } }
        try await waitUntil { count.withLock { $0 } == 1 }
        timers.cancel(entry)
        #expect(timers.pendingCount == 0)
        #expect(count.withLock { $0 } == 1)
    }

    @Test func aDeadlineOnTheSystemClockReleasesTheCallerFromAnOperationThatNeverReturns() async throws {
        let never = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let error = await #expect(throws: CloudSyncError.self) {
            // The operation ignores cancellation: only the deadline can release the caller.
            try await withDeadline(
                .milliseconds(20), clock: SystemClock(), timeoutError: { CloudSyncError(.timeout, "late") },
                { await withCheckedContinuation { continuation in never.withLock { $0 = continuation } } })
        }
        #expect(error?.code == .timeout)
        never.withLock { $0?.resume() }
    }

    @Test func anOperationThatAnswersAtOnceLeavesNoTimerBehind() async throws {
        let timers = TimerThread()
        let clock = TimerThreadClock(timers: timers)
        for value in 0..<100 {
            let answer = try await withDeadline(
                .milliseconds(20), clock: clock, timeoutError: { CloudSyncError(.timeout, "late") }, { value })
            #expect(answer == value)
        }
        // Timers fire in due order, so once one armed after all of them has fired, any deadline left armed would
        // have fired first.
        let sentinel = Mutex(false)
        _ = timers.schedule(after: .milliseconds(40)) { sentinel.withLock { $0 = true } }
        try await waitUntil { sentinel.withLock { $0 } }
        #expect(clock.fired.withLock { $0 } == 0)
    }

}

/// The system clock's timers on a thread of the test's own, counting what fires.
private final class TimerThreadClock: StoreClock, Sendable {
    let timers: TimerThread
    let fired = Mutex(0)
    init(timers: TimerThread) { self.timers = timers }
    func nowMilliseconds() -> Int64 { SystemClock().nowMilliseconds() }
    func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let entry = timers.schedule(after: delay) { [self] in
            fired.withLock { $0 += 1 }
            action()
        }
        return ScheduledAction { [timers] in timers.cancel(entry) }
    }
}
