import CloudSync
import Synchronization

/// A clock that moves only when a test says so: deadlines, backoff and ages without real waiting.
public final class ManualClock: StoreClock {
    private struct Sleeper {
        let id: Int
        let deadline: Int64
        /// Called with true when the deadline comes, false when cancelled first.
        let wake: @Sendable (Bool) -> Void
    }

    private struct State {
        var now: Int64
        var sleepers: [Sleeper] = []
        var nextID = 0
        /// Sleeps cancelled before they were registered, so they never register.
        var cancelledBeforeRegistering: Set<Int> = []
    }

    private let state: Mutex<State>

    /// A clock reading `milliseconds` since 1970 (default: 2026-01-01T00:00:00Z).
    public init(milliseconds: Int64 = 1_767_225_600_000) {
        state = Mutex(State(now: milliseconds))
    }

    /// The clock's time in milliseconds since 1970; changes only with ``advance(by:)``.
    public func nowMilliseconds() -> Int64 { state.withLock { $0.now } }

    /// Number of sleeps and timers waiting on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    private func nextID() -> Int {
        state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
    }

    /// Registers a sleeper unless it was cancelled already; returns false when it was.
    private func register(id: Int, after duration: Duration, wake: @escaping @Sendable (Bool) -> Void) -> Bool {
        state.withLock { state in
            if state.cancelledBeforeRegistering.remove(id) != nil { return false }
            state.sleepers.append(Sleeper(id: id, deadline: state.now + duration.milliseconds, wake: wake))
            return true
        }
    }

    /// Removes a sleeper before its deadline; remembers the id when it has not registered yet.
    private func cancel(id: Int) -> Sleeper? {
        state.withLock { state in
            guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                state.cancelledBeforeRegistering.insert(id)
                return nil
            }
            return state.sleepers.remove(at: index)
        }
    }

    /// Returns when ``advance(by:)`` moves the clock to `duration` from now or past it; never on its own.
    ///
    /// Throws `CancellationError` when the task is cancelled first.
    public func sleep(for duration: Duration) async throws {
        let id = nextID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let registered = register(id: id, after: duration) { fired in
                    if fired { continuation.resume() } else { continuation.resume(throwing: CancellationError()) }
                }
                if !registered { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            cancel(id: id)?.wake(false)
        }
    }

    /// Runs `action` during the ``advance(by:)`` that reaches `delay` from now; cancelling the returned action first
    /// means it never runs.
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let id = nextID()
        _ = register(id: id, after: delay) { fired in if fired { action() } }
        return ScheduledAction { [weak self] in _ = self?.cancel(id: id) }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now += duration.milliseconds
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.wake(true) }
    }

    /// Returns once a sleep or timer waits for exactly `duration` from now: that one, whatever else sleeps on the
    /// clock (a request's deadline, say), so a test can tell a poller asleep between polls from one mid-request.
    ///
    /// Throws as ``waitForSleepers(_:limit:fileID:line:)`` does.
    public func waitForSleeper(
        wakingIn duration: Duration, limit: Duration = .seconds(120), fileID: String = #fileID, line: Int = #line
    ) async throws {
        try await waitUntil(limit: limit, fileID: fileID, line: line) {
            self.state.withLock { state in
                state.sleepers.contains { $0.deadline == state.now + duration.milliseconds }
            }
        }
    }

    /// Returns once at least `count` sleeps or timers wait on this clock, so a test can advance past them.
    ///
    /// Throws ``ConditionNotReached`` (naming the caller's file and line) when they have not come within `limit` of
    /// real time, and `CancellationError` when the task is cancelled first.
    public func waitForSleepers(
        _ count: Int = 1, limit: Duration = .seconds(120), fileID: String = #fileID, line: Int = #line
    ) async throws {
        try await waitUntil(limit: limit, fileID: fileID, line: line) { self.sleeperCount >= count }
    }
}

/// What ``waitUntil(limit:fileID:line:_:)`` throws when its condition did not hold in time: where it was waited
/// for and how long.
public struct ConditionNotReached: Error, CustomStringConvertible {
    /// The real time waited.
    public let limit: Duration
    /// The file (`Module/File.swift`) and line of the wait that gave up.
    public let fileID: String
    public let line: Int

    public var description: String { "\(fileID):\(line): condition not reached within \(limit)" }
}

/// Waits until `condition` holds, checking between yields; for states other tasks reach without any clock
/// involved (a call entering a hang, a timer being registered).
///
/// Gives up after `limit` of real time by throwing ``ConditionNotReached``, which names the caller's file and line:
/// the test that waited fails with that message and stops there, and the other tests go on (a crash here would end
/// the whole test process and every result with it). Throws `CancellationError` when the task is cancelled first.
public func waitUntil(
    limit: Duration = .seconds(120), fileID: String = #fileID, line: Int = #line, _ condition: @Sendable () -> Bool
) async throws {
    let start = ContinuousClock.now
    while !condition() {
        try Task.checkCancellation()
        guard ContinuousClock.now - start < limit else {
            throw ConditionNotReached(limit: limit, fileID: fileID, line: line)
        }
        await Task.yield()
        try? await Task.sleep(for: .milliseconds(1))
    }
}

/// ``waitUntil(limit:fileID:line:_:)`` for a condition that must itself wait (a provider read, a flush).
public func waitUntil(
    limit: Duration = .seconds(120), fileID: String = #fileID, line: Int = #line,
    asking condition: @Sendable () async throws -> Bool
) async throws {
    let start = ContinuousClock.now
    while !(try await condition()) {
        try Task.checkCancellation()
        guard ContinuousClock.now - start < limit else {
            throw ConditionNotReached(limit: limit, fileID: fileID, line: line)
        }
        await Task.yield()
        try? await Task.sleep(for: .milliseconds(1))
    }
}
