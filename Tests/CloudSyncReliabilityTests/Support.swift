import Foundation

enum Repository {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let python = root + "/.build/pyenv/bin/python3"
}

/// moto's S3 on a free loopback port (`scripts/moto_s3.py`), alive until this object goes away and closes its input.
final class MotoS3: @unchecked Sendable {
    struct Missing: Error, CustomStringConvertible { let description: String }

    let endpoint: String
    private let process = Process()
    private let input = Pipe()

    init(buckets: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Repository.python) else {
            throw Missing(description: "the Python test environment is missing: run scripts/python-env.sh")
        }
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: Repository.python)
        process.arguments = [Repository.root + "/scripts/moto_s3.py"] + buckets
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var printed = ""
        while let byte = try output.fileHandleForReading.read(upToCount: 1), let character = byte.first,
            character != UInt8(ascii: "\n")
        {
            printed.append(Character(UnicodeScalar(character)))
        }
        guard let port = Int(printed) else {
            process.terminate()
            throw Missing(description: "moto did not start (it printed \"\(printed)\")")
        }
        endpoint = "http://127.0.0.1:\(port)"
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// Every regular file under `directory`, recursively.
func filesUnder(_ directory: String) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
    return walker.compactMap { $0 as? String }.map { directory + "/" + $0 }.filter { path in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
    }
}
