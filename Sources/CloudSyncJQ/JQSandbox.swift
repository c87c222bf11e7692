import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A jq program run on values in a worker process of its own (``JQWorker``, the `cloudsync-jq` executable).
///
/// Each value runs under ``JQLimits``: a program that loops, recurses or grows without end fails the value it was running, with a message
/// naming the limit, and the next value gets a fresh worker. Nothing a program does reaches this process.
///
/// Values run in order, sent to the worker in chunks (``chunkBytes``) and answered in the same order, on a queue of
/// the sandbox's own, so a wait never holds a thread of the concurrency pool.
public final class JQSandbox: Sendable {
    /// The program, as written.
    public let program: String
    /// What each value may spend.
    public let limits: JQLimits
    private let executable: String
    private let worker = Mutex<RunningWorker?>(nil)
    private let queue = DispatchQueue(label: "cloudsync.jq")

    /// A sandbox for `program`, compiled here first so a program that does not compile is refused at once.
    ///
    /// The error is jq's message. `executable` is the worker's path (default: ``workerPath()``).
    public init(program: String, limits: JQLimits = JQLimits(), executable: String? = nil) throws(JQError) {
        _ = try JQProgram(program)
        self.program = program
        self.limits = limits
        if let executable {
            self.executable = executable
        } else {
            self.executable = try Self.workerPath()
        }
    }

    deinit { worker.withLock { $0?.stop() } }

    /// What the program makes of each of `values` (JSON texts as bytes), in order.
    public func run(_ values: [[UInt8]]) async -> [JQResult] {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.runNow(values)) }
        }
    }

    /// The most bytes of values sent to the worker as one batch (more only for a single value larger than this): the
    /// worker holds a batch in memory before it answers.
    static let chunkBytes = 256 << 10

    /// `values`, on the calling thread, through the running worker or new ones.
    ///
    /// They are sent a chunk at a time, so each chunk costs one wait for the worker rather than one per value. The
    /// worker sends a chunk's answers together, so when one ends mid-chunk it is not known which value ended it: the
    /// values left in that chunk go again one at a time until one ends a worker alone (it fails, with why), and the
    /// rest go in chunks again.
    private func runNow(_ values: [[UInt8]]) -> [JQResult] {
        var results: [JQResult] = []
        results.reserveCapacity(values.count)
        worker.withLock { running in
            var next = 0
            // Values before this index go one at a time: a worker ended among them.
            var singlesUntil = 0
            while next < values.count {
                if running == nil {
                    switch RunningWorker.start(executable, program: program, limits: limits) {
                    case .success(let started): running = started
                    case .failure(let error):
                        results += Array(repeating: JQResult(error: error.message), count: values.count - next)
                        return
                    }
                }
                let end = next < singlesUntil ? next + 1 : chunkEnd(values, from: next)
                let (answered, failure) = running!.run(values[next..<end])
                results += answered
                next += answered.count
                guard let failure else { continue }
                running = nil
                if end - next == 1 {
                    // The one value left unanswered ended it: it fails, and whatever follows goes in chunks again.
                    results.append(JQResult(error: failure.message))
                    next += 1
                    singlesUntil = next
                } else {
                    singlesUntil = end
                }
            }
        }
        return results
    }

    /// Where a chunk starting at `start` ends: at ``chunkBytes`` of values, and after at least one.
    private func chunkEnd(_ values: [[UInt8]], from start: Int) -> Int {
        var end = start
        var bytes = 0
        while end < values.count, end == start || bytes + values[end].count <= Self.chunkBytes {
            bytes += values[end].count
            end += 1
        }
        return end
    }

    /// Where the worker executable is: `CLOUDSYNC_JQ_WORKER` when set; else `cloudsync-jq` beside this process's
    /// executable (a build directory), or in `../libexec/cloudsync/` from it (as `make install` puts it).
    public static func workerPath() throws(JQError) -> String {
        if let named = getenv("CLOUDSYNC_JQ_WORKER").map({ String(cString: $0) }), !named.isEmpty { return named }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let executable =
            length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let directory = executable.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/")
        let candidates = [directory + "/cloudsync-jq", directory + "/../libexec/cloudsync/cloudsync-jq"]
        if let found = candidates.first(where: { access($0, X_OK) == 0 }) { return found }
        throw JQError(
            "cloudsync-jq, which runs jq programs, is neither at \(candidates[0]) nor at \(candidates[1]); install "
                + "cloudsync with `make install`, or set CLOUDSYNC_JQ_WORKER to its path")
    }
}

/// One worker process and the socket to it.
private struct RunningWorker {
    let pid: pid_t
    let socket: Int32
    let limits: JQLimits
    let frames: JQFrames

    init(pid: pid_t, socket: Int32, limits: JQLimits) {
        self.pid = pid
        self.socket = socket
        self.limits = limits
        frames = JQFrames(input: socket, output: socket)
    }

    /// Starts a worker and hands it `program`; the error says why it could not (or jq's message if the program does
    /// not compile there).
    static func start(_ executable: String, program: String, limits: JQLimits) -> Result<RunningWorker, JQError> {
        var ends: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            return .failure(JQError("could not start cloudsync-jq: socketpair failed (errno \(errno))"))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[1], 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        // Opened for writing only, never replaced: the worker writes nothing there unless libjq itself fails.
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let arguments = [executable] + limits.workerArguments
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var environment: [UnsafeMutablePointer<CChar>?] = [nil]
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, &argv, &environment)
        close(ends[1])
        guard spawned == 0 else {
            close(ends[0])
            return .failure(JQError("could not start \(executable): \(String(cString: strerror(spawned)))"))
        }
        let worker = RunningWorker(pid: pid, socket: ends[0], limits: limits)
        guard worker.frames.write(.program, program), worker.frames.flush(), let answer = worker.frames.read() else {
            return .failure(worker.ended(during: "compiling the program"))
        }
        switch answer.kind {
        case .compiled: return .success(worker)
        case .compileError:
            worker.stop()
            return .failure(JQError(String(decoding: answer.bytes, as: UTF8.self)))
        default: return .failure(worker.ended(during: "compiling the program"))
        }
    }

    /// The program's results for `values`, sent all at once and then read, in order; with the error that ended the
    /// worker (it is gone then) when it ended before answering them all, at the first value it did not answer.
    func run(_ values: ArraySlice<[UInt8]>) -> (results: [JQResult], failure: JQError?) {
        for value in values {
            let sent = value.withUnsafeBytes { frames.write(.value, $0) }
            guard sent else { return ([], ended(during: "the value")) }
        }
        guard frames.write(.batchEnd), frames.flush() else { return ([], ended(during: "the value")) }
        var results: [JQResult] = []
        var result = JQResult()
        while results.count < values.count {
            guard let frame = frames.read() else { return (results, ended(during: "the value")) }
            switch frame.kind {
            case .output: result.outputs.append(String(decoding: frame.bytes, as: UTF8.self))
            case .more: result.more = true
            case .error: result.error = String(decoding: frame.bytes, as: UTF8.self)
            case .done:
                results.append(result)
                result = JQResult()
            default: return (results, ended(during: "the value"))
            }
        }
        return (results, nil)
    }

    /// Closes the socket (the worker exits when it reads the end) and reaps the process.
    func stop() {
        close(socket)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }

    /// Why the worker stopped answering, from its exit status, after reaping it.
    func ended(during work: String) -> JQError {
        close(socket)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let signal = status & 0x7f
        let code = (status >> 8) & 0xff
        if signal == SIGPROF {
            return JQError("the jq program ran past its CPU limit of \(limits.cpuSeconds) s on \(work)")
        }
        if signal == 0, code == JQWorker.outOfMemoryStatus {
            return JQError("the jq program ran past its memory limit of \(limits.memoryBytes) bytes on \(work)")
        }
        if signal != 0 {
            return JQError(
                "the jq program's worker crashed (signal \(signal)) on \(work); a program that nests values very "
                    + "deeply or reaches its memory limit of \(limits.memoryBytes) bytes can")
        }
        return JQError("the jq program's worker exited with status \(code) on \(work)")
    }
}
