import Foundation

/// A fresh directory under the system's temporary directory, removed with everything in it when released.
public final class TemporaryDirectory: Sendable {
    /// Absolute path of the directory.
    public let path: String

    /// Creates a new, empty directory named `<prefix>-XXXXXX` (random suffix, mode 0700) under the system's temporary
    /// directory.
    ///
    /// Throws a `CocoaError` when the directory cannot be created.
    public init(prefix: String = "cloudsync-test") throws {
        let base = NSTemporaryDirectory().hasSuffix("/") ? NSTemporaryDirectory() : NSTemporaryDirectory() + "/"
        var template = Array("\(base)\(prefix)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let created else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: "\(base)\(prefix)-XXXXXX"])
        }
        path = created
    }

    /// `name` inside the directory.
    public func file(_ name: String) -> String { "\(path)/\(name)" }

    /// Creates the directory `name` inside this one and writes `count` files in it, `k0`, `k1`, ..., each holding
    /// `value(index)`: a `directory` provider's keys.
    public func fill(_ name: String, count: Int, value: (Int) -> String = { "v\($0)" }) throws {
        try FileManager.default.createDirectory(atPath: file(name), withIntermediateDirectories: true)
        for index in 0..<count {
            try value(index).write(toFile: file("\(name)/k\(index)"), atomically: false, encoding: .utf8)
        }
    }

    /// Removes the directory, first keeping a copy of any run report in it for the suite's schema check
    /// (``ReportCollection``).
    deinit {
        ReportCollection.keepReports(under: path)
        try? FileManager.default.removeItem(atPath: path)
    }
}
