import CloudSync
import Dispatch
import Foundation

/// File-system chores shared by the local providers.
enum LocalFiles {
    /// Creates the directory that will hold `path` (and its parents) with mode 0700 when it is missing.
    static func createDirectory(containing path: String) throws(CloudSyncError) {
        let directory = (path as NSString).deletingLastPathComponent
        guard !directory.isEmpty else { return }
        try createDirectory(directory)
    }

    /// Creates `directory` (and its parents) with mode 0700 when it is missing; refuses a path that is not a directory.
    static func createDirectory(_ directory: String) throws(CloudSyncError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw CloudSyncError(
                    .config, "\(directory) exists and is not a directory; choose another path")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CloudSyncError(
                .config, "cannot create the directory \(directory): \(describeFileError(error)); check its parent")
        }
    }

    /// Runs blocking file work on a dispatch queue, so the Swift concurrency pool's few threads stay free.
    static func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}

/// A file-system error as a sentence: the OS's reason, never a Foundation error dump.
package func describeFileError(_ error: any Error) -> String {
    let nsError = error as NSError
    if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
        return String(cString: strerror(Int32(underlying.code)))
    }
    if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
    switch CocoaError.Code(rawValue: nsError.code) {
    case .fileNoSuchFile, .fileReadNoSuchFile: return "no such file or directory"
    case .fileWriteNoPermission, .fileReadNoPermission: return "permission denied"
    case .fileWriteOutOfSpace: return "no space left on the device"
    case .fileWriteVolumeReadOnly: return "the file system is read-only"
    case .fileWriteFileExists: return "a file is in the way"
    default: return nsError.localizedDescription
    }
}
