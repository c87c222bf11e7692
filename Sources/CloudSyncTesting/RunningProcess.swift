import Foundation
import Synchronization

/// A built executable running in the background, for tests of servers: read its output line by line while it runs,
/// signal it, and wait for it to end.
///
/// Tests await ``line(timeout:)`` and ``exited()``, which wait on a thread of their own: Swift Testing runs tests on
/// the cooperative pool (one thread per core), and a test blocking one of those threads stalls every other test.
public final class RunningProcess: Sendable {
    private let process: Process
    private let output: LineReader
    private let errors: LineReader

    /// Starts `executable` with `arguments`, no standard input.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        currentDirectory: String? = nil
    ) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        output = LineReader(outputPipe.fileHandleForReading)
        errors = LineReader(errorPipe.fileHandleForReading)
    }

    /// The process id.
    public var pid: Int32 { process.processIdentifier }

    /// The next line of standard output (without its newline), waiting up to `timeout` on a thread of its own; nil
    /// when the output ended or nothing came in time.
    public func line(timeout: Duration = .seconds(30)) async -> String? {
        await offPool { self.output.nextLine(timeout: timeout) }
    }

    /// The next line of standard error, as ``line(timeout:)`` reads standard output.
    public func errorLine(timeout: Duration = .seconds(30)) async -> String? {
        await offPool { self.errors.nextLine(timeout: timeout) }
    }

    /// The address a `cloudsync serve` started as this process listens on, read from its `serving … on http://…/`
    /// line on standard error; nil when the process ended or said nothing of the kind within `timeout` a line.
    public func servingURL(timeout: Duration = .seconds(60)) async -> URL? {
        while let line = await errorLine(timeout: timeout) {
            guard line.hasPrefix("serving "), let range = line.range(of: " on http") else { continue }
            return URL(string: String(line[line.index(range.lowerBound, offsetBy: 4)...].prefix { $0 != " " }))
        }
        return nil
    }

    /// ``line(timeout:)`` blocking the calling thread: only for code that already runs on a thread of its own.
    @available(*, noasync, message: "blocks a thread of the concurrency pool; use line(timeout:)")
    public func nextLine(timeout: Duration = .seconds(30)) -> String? { output.nextLine(timeout: timeout) }

    /// Sends `signal` (SIGTERM by default).
    public func signal(_ signal: Int32 = SIGTERM) { kill(process.processIdentifier, signal) }

    /// Sends `signal` once `reached` holds (the run got that far), or after `limit` at the latest; an error
    /// `reached` throws ends the watch with that error, sending nothing.
    ///
    /// The run is watched from a thread of its own, every millisecond: a watch on the concurrency pool, queued behind
    /// every other test's work, would see the point late, after the run had gone much further or ended.
    public func signal(
        _ signal: Int32, once reached: @escaping @Sendable () throws -> Bool, within limit: TimeInterval
    ) async throws {
        try await offPool {
            let deadline = Date().addingTimeInterval(limit)
            while Date() < deadline, try !reached() { usleep(1000) }
            self.signal(signal)
        }
    }

    /// The number of entries in `directory` (none when it cannot be read), for a ``signal(_:once:within:)`` watch.
    public static func entries(in directory: String) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: directory))?.count ?? 0
    }

    /// Waits for the process to end, on a thread of its own, and returns its status (the signal number when a signal
    /// ended it) and the rest of what it printed.
    ///
    /// When the waiting task is cancelled (a test's `.timeLimit` ran out, say), the process is killed with SIGKILL, so
    /// a hung child ends the wait and the test fails by name instead of hanging the run.
    public func exited() async -> ProcessResult {
        await withTaskCancellationHandler {
            await offPool { self.wait() }
        } onCancel: {
            signal(SIGKILL)
        }
    }

    /// ``exited()`` blocking the calling thread: only for code that already runs on a thread of its own.
    @available(*, noasync, message: "blocks a thread of the concurrency pool; use exited()")
    public func wait() -> ProcessResult {
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus, standardOutput: output.rest(), standardError: errors.rest())
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Reads a pipe on its own thread, handing out complete lines.
private final class LineReader: Sendable {
    private struct State {
        var buffer = Data()
        var ended = false
    }

    private let state = Mutex(State())
    private let changed = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                state.withLock { state in
                    if chunk.isEmpty { state.ended = true } else { state.buffer.append(chunk) }
                }
                changed.signal()
                if chunk.isEmpty { break }
            }
            finished.signal()
        }
    }

    func nextLine(timeout: Duration) -> String? {
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        while true {
            let line = state.withLock { state -> String?? in
                if let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: state.buffer[..<newline], as: UTF8.self)
                    state.buffer.removeSubrange(...newline)
                    return .some(line)
                }
                return state.ended ? .some(nil) : nil
            }
            if let line { return line }
            if changed.wait(timeout: deadline) == .timedOut { return nil }
        }
    }

    func rest() -> String {
        finished.wait()
        finished.signal()
        return state.withLock { String(decoding: $0.buffer, as: UTF8.self) }
    }
}
