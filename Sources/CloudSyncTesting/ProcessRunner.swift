import Foundation

/// What a finished child process printed and how it exited.
public struct ProcessResult: Sendable {
    /// The exit status, or the signal number when a signal ended the process.
    public let status: Int32
    /// Everything the process wrote to standard output, decoded as UTF-8.
    public let standardOutput: String
    /// Everything the process wrote to standard error, decoded as UTF-8.
    public let standardError: String
}

/// Runs the executables this package builds, as a user would, for end-to-end tests.
public enum ProcessRunner {
    /// The path of an executable product built beside the running test bundle, such as `.build/debug/cloudsync`.
    public static func builtProduct(_ name: String) throws -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The test binary may sit inside a bundle directory; walk up until the product is found.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw CocoaError(
            .fileNoSuchFile,
            userInfo: [NSLocalizedDescriptionKey: "no built product '\(name)' near \(CommandLine.arguments[0])"])
    }

    /// Runs `executable` with `arguments`, no standard input, and waits for it to exit on a thread of its own, so
    /// the waiting test holds none of the cooperative pool's few threads; cancelling the waiting task kills it (see
    /// ``RunningProcess/exited()``).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        currentDirectory: String? = nil
    ) async throws -> ProcessResult {
        let process = try RunningProcess(
            executable, arguments, environment: environment, currentDirectory: currentDirectory)
        let result = await process.exited()
        if ReportCollection.printsReport(arguments) { ReportCollection.keep(text: result.standardOutput) }
        return result
    }

    /// Runs `executable` with `arguments`, no standard input, and blocks the calling thread until it exits: only for
    /// code that already runs on a thread of its own (`offPool(_:)`); async code awaits ``run(_:_:environment:currentDirectory:)``.
    @available(*, noasync, message: "blocks a thread of the concurrency pool; use ProcessRunner.run")
    public static func runBlocking(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        currentDirectory: String? = nil
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read both pipes to the end before waiting, so a chatty child cannot block on a full pipe.
        let errorData = ErrorCollector(error.fileHandleForReading)
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = ProcessResult(
            status: process.terminationStatus, standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData.wait(), as: UTF8.self))
        if ReportCollection.printsReport(arguments) { ReportCollection.keep(text: result.standardOutput) }
        return result
    }
}

/// Drains a pipe on its own thread.
private final class ErrorCollector: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
