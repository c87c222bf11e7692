import Foundation

/// Runs blocking work (waiting for a child process, reading a pipe) on a thread of its own and awaits its result.
///
/// Swift Testing runs tests on the cooperative pool, which has one thread per core: a test that blocks a pool
/// thread on a child process starves every other running test, and on a two-core machine a few of them stall the
/// suite until clock-driven tests give up waiting.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Runs blocking work that cannot fail on a thread of its own and awaits its result.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}
