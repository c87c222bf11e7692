#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body` and returns its result with the processor time the calling thread spent in it.
///
/// For a bound on how much work something does (a guard against quadratic loops): unlike elapsed time, a thread's
/// processor time does not grow while other processes have the machine, so the bound holds on a busy machine and
/// still fails when the work grows. `body` must run on this thread only (synchronous code).
public func measuringThreadCPUTime<T>(_ body: () throws -> T) rethrows -> (result: T, cpuTime: Duration) {
    let before = threadCPUTime()
    let result = try body()
    return (result, threadCPUTime() - before)
}

private func threadCPUTime() -> Duration {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
}
