import Foundation

/// `scripts/moto_s3.py` serving moto's S3 on a free loopback port with `buckets` made, until ``stop()``.
final class MotoServer {
    let endpoint: URL
    private let process: Process
    private let input: Pipe

    /// Nil when `.build/pyenv` (scripts/python-env.sh) is missing.
    init?(buckets: [String]) throws {
        let python = FileManager.default.currentDirectoryPath + "/.build/pyenv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else { return nil }
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["scripts/moto_s3.py"] + buckets
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line += byte
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else { fatalError("moto did not start") }
        endpoint = URL(string: "http://127.0.0.1:\(port)")!
    }

    /// Closes moto's standard input, which stops it, and waits for it to exit.
    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
