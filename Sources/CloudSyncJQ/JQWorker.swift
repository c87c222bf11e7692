#if canImport(Glibc)
    import Glibc
#endif

/// The worker process a ``JQSandbox`` starts (`cloudsync-jq`): it compiles one program and runs it on the values its
/// parent sends, under limits it sets on itself before reading the program.
///
/// - Memory: `RLIMIT_DATA` caps its heap; when libjq cannot allocate, the worker exits with ``outOfMemoryStatus``.
/// - CPU: a profiling timer armed for each value; the `SIGPROF` it raises past the limit ends the worker.
/// - Files: none can be opened (`RLIMIT_NOFILE` is 3, the three it has) or written (`RLIMIT_FSIZE` is 0), and no
///   core is dumped.
///
/// The parent reads what ended a worker from its exit status, says so for the value it was running, and starts
/// another for the next value.
public enum JQWorker {
    /// The exit status of a worker libjq could not allocate for.
    public static let outOfMemoryStatus: Int32 = 3
    /// The exit status of a worker started wrongly (by hand, or with arguments it does not know).
    public static let usageStatus: Int32 = 2

    /// Runs the worker on standard input and output with the limits `arguments` give; returns its exit status.
    public static func main(arguments: [String]) -> Int32 {
        guard let limits = JQLimits(workerArguments: arguments) else {
            let usage =
                "cloudsync-jq runs jq programs for cloudsync, which starts it with the limits to keep; it is not run "
                + "by hand\n"
            var text = usage
            _ = text.withUTF8 { Glibc.write(2, $0.baseAddress, $0.count) }
            return usageStatus
        }
        limit(RLIMIT_CORE, 0)
        limit(RLIMIT_FSIZE, 0)
        limit(RLIMIT_DATA, rlim_t(limits.memoryBytes))
        limit(RLIMIT_NOFILE, 3)
        let frames = JQFrames(input: 0, output: 1)
        guard let first = frames.read(), first.kind == .program else { return usageStatus }
        let program: JQProgram
        do {
            program = try JQProgram(String(decoding: first.bytes, as: UTF8.self))
        } catch {
            _ = frames.write(.compileError, error.message) && frames.flush()
            return 0
        }
        program.onOutOfMemory { _ in _exit(JQWorker.outOfMemoryStatus) }
        guard frames.write(.compiled), frames.flush() else { return 0 }
        var batch: [[UInt8]] = []
        while let frame = frames.read() {
            switch frame.kind {
            case .value: batch.append(frame.bytes)
            case .batchEnd:
                for value in batch {
                    armCPUTimer(seconds: limits.cpuSeconds)
                    let result = value.withUnsafeBytes { program.run($0, maxOutputs: limits.maxOutputs) }
                    armCPUTimer(seconds: 0)
                    guard send(result, on: frames) else { return 0 }
                }
                guard frames.flush() else { return 0 }
                batch.removeAll(keepingCapacity: true)
            default: return usageStatus
            }
        }
        return 0
    }

    private static func send(_ result: JQResult, on frames: JQFrames) -> Bool {
        for output in result.outputs where !frames.write(.output, output) { return false }
        if result.more, !frames.write(.more) { return false }
        if let error = result.error, !frames.write(.error, error) { return false }
        return frames.write(.done)
    }

    /// Arms (or with 0 disarms) the process's profiling timer, whose `SIGPROF` ends the process.
    private static func armCPUTimer(seconds: Double) {
        let whole = Int(seconds)
        var timer = itimerval(
            it_interval: timeval(tv_sec: 0, tv_usec: 0),
            it_value: timeval(tv_sec: whole, tv_usec: Int((seconds - Double(whole)) * 1_000_000)))
        setitimer(__itimer_which_t(ITIMER_PROF.rawValue), &timer, nil)
    }

    private static func limit(_ resource: __rlimit_resource, _ value: rlim_t) {
        var limit = rlimit(rlim_cur: value, rlim_max: value)
        setrlimit(__rlimit_resource_t(resource.rawValue), &limit)
    }
}
