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

    /// Removes the directory, first keeping a copy of any run report in it for the suite's schema check
    /// (``ReportCollection``).
    deinit {
        ReportCollection.keepReports(under: path)
        try? FileManager.default.removeItem(atPath: path)
    }
}
