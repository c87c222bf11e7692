import Foundation
import Synchronization

/// moto's S3 server on 127.0.0.1 and a free port, with some buckets made, in a child process; or nanio's
/// (``startNanio(repository:accessKey:secretKey:buckets:)``), a second S3 implementation that, unlike moto, checks
/// every request's signature, started through the same protocol by `scripts/nanio_s3.py`.
///
/// It runs `scripts/moto_s3.py` with the Python environment `scripts/python-env.sh` makes in `.build/pyenv`, and
/// exits when its standard input closes: at ``stop()``, or when this object goes away. The one way the tests and the benchmarks start it, so each can tell a missing environment from a failed start.
public final class MotoS3Server: @unchecked Sendable {
    /// moto could not be started: the Python environment is missing, or the script printed no port.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The port moto listens on.
    public let port: Int
    /// `http://127.0.0.1:PORT`.
    public var endpoint: URL { URL(string: "http://127.0.0.1:\(port)")! }

    private let process: Process
    private let input: Pipe
    private let stopped = Mutex(false)

    /// Starts moto with `buckets` made, waiting for it on a thread of its own (moto takes seconds to start, and a test
    /// must not hold a thread of the concurrency pool that long); what ``init(repository:buckets:niceness:)`` throws.
    public static func start(repository: String, buckets: [String], niceness: Int? = nil) async throws
        -> MotoS3Server
    {
        try await offPool { try MotoS3Server(repository: repository, buckets: buckets, niceness: niceness) }
    }

    /// Starts moto with `buckets` made, blocking the calling thread until it listens (see ``start(repository:buckets:niceness:)``).
    ///
    /// - Parameters:
    ///   - repository: the checkout holding `scripts/moto_s3.py` and `.build/pyenv`.
    ///   - niceness: when given, moto runs under `nice -n` that much (so a test driving many processes keeps the
    ///     server from taking their time).
    /// - Throws: ``Unavailable`` when `.build/pyenv` is missing or moto prints no port; what `Process.run()` throws.
    public convenience init(repository: String, buckets: [String], niceness: Int? = nil) throws {
        try self.init(repository: repository, script: "moto_s3.py", arguments: buckets, niceness: niceness)
    }

    /// Starts nanio with `buckets` made, accepting requests signed with `accessKey` and `secretKey`, waiting for it
    /// on a thread of its own.
    public static func startNanio(repository: String, accessKey: String, secretKey: String, buckets: [String])
        async throws -> MotoS3Server
    {
        try await offPool {
            try MotoS3Server(
                repository: repository, script: "nanio_s3.py", arguments: [accessKey, secretKey] + buckets,
                niceness: nil)
        }
    }

    /// Runs `scripts/SCRIPT ARGUMENTS...`, which prints its port once it listens and serves until its input closes.
    private init(repository: String, script name: String, arguments: [String], niceness: Int?) throws {
        let python = repository + "/.build/pyenv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Unavailable(
                description: "the Python test environment is missing: run scripts/python-env.sh (make test does)")
        }
        let script = [python, repository + "/scripts/" + name] + arguments
        process = Process()
        if let niceness {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/nice")
            process.arguments = ["-n", String(niceness)] + script
        } else {
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = Array(script.dropFirst())
        }
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The script prints its port on a line of its own once it listens.
        var line: [UInt8] = []
        while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
            line.append(byte)
        }
        let printed = String(decoding: line, as: UTF8.self)
        guard let port = Int(printed) else {
            process.terminate()
            process.waitUntilExit()
            throw Unavailable(
                description:
                    "\(name) did not start (it printed \"\(printed)\"); scripts/python-env.sh installs its server")
        }
        self.port = port
    }

    /// Closes moto's standard input, which stops it, and waits for it to exit; later calls do nothing.
    public func stop() {
        guard closeInput() else { return }
        process.waitUntilExit()
    }

    /// ``stop()``, waiting on a thread of its own.
    public func stopped() async {
        await offPool { self.stop() }
    }

    /// Closes moto's standard input once; true the first time.
    private func closeInput() -> Bool {
        guard
            stopped.withLock({ stopped in
                defer { stopped = true }
                return !stopped
            })
        else { return false }
        try? input.fileHandleForWriting.close()
        return true
    }

    /// Stops moto without waiting for it to exit (it does so on its own once its input closes): a deinit may run on a
    /// thread of the concurrency pool.
    deinit { _ = closeInput() }
}
