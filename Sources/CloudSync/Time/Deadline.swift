import Synchronization

/// Runs `operation` but stops waiting for it after `timeout` on `clock`, throwing `ERR_TIMEOUT`.
///
/// The operation runs in its own task, which is cancelled at the deadline; once it has suspended, the caller is
/// released at the deadline even if the operation ignores cancellation (a hung socket, a provider that never
/// checks), so one stuck call can never stall the store beyond its timeout. Cancelling the caller cancels the
/// operation too.
///
/// When the deadline wins, `onAbandoned` receives a task that ends when the abandoned operation finally returns, so a
/// caller can keep what the operation touches locked until then.
package func withDeadline<T: Sendable>(
    _ timeout: Duration?, clock: any StoreClock, timeoutError: @escaping @Sendable () -> CloudSyncError,
    onAbandoned: (@Sendable (Task<Void, Never>) -> Void)? = nil,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let timeout else { return try await operation() }
    let race = DeadlineRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.start(continuation)
            // The work starts on the caller's thread and runs there until it first suspends: a call that answers
            // without waiting (a cached read, an error from a provider known to be offline) costs no thread hop.
            // A provider call that blocks its thread before suspending would hold the caller too; the provider
            // contract forbids that (``Provider``).
            let work = Task.immediate {
                let result: Result<T, any Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                race.finish(result)
            }
            // The timer is armed as the work starts, so running work always has a deadline.
            let timer = clock.schedule(after: timeout) {
                if race.finish(.failure(timeoutError())) {
                    onAbandoned?(Task { _ = await work.result })
                }
            }
            race.onFinish {
                work.cancel()
                timer.cancel()
            }
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The first of the operation, the timer or a cancellation to finish resumes the caller; the others are ignored.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var pending: Result<T, any Error>?
        var finished = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLock { state -> Result<T, any Error>? in
            if let pending = state.pending { return pending }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// Registers what to stop once the race is decided; runs at once when it already is.
    func onFinish(_ cleanup: @escaping @Sendable () -> Void) {
        let decided = state.withLock { state -> Bool in
            if state.finished { return true }
            state.cleanup = cleanup
            return false
        }
        if decided { cleanup() }
    }

    /// Returns true when this call decided the race.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (continuation, cleanup, won) = state.withLock {
            state -> (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?, Bool) in
            guard !state.finished else { return (nil, nil, false) }
            state.finished = true
            let continuation = state.continuation
            if continuation == nil { state.pending = result }
            state.continuation = nil
            defer { state.cleanup = nil }
            return (continuation, state.cleanup, true)
        }
        // Stop the losers before resuming the caller, so nothing of this call is still running when it returns.
        cleanup?()
        continuation?.resume(with: result)
        return won
    }
}
