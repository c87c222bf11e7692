import Foundation

/// Runs `body`, which blocks (waits for child processes, sleeps between kills), on a thread of its own and awaits
/// its result, so a long test does not hold one of the few threads the concurrency pool shares with every other
/// test running at the same time.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
