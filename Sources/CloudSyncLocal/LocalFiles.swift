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
            throw CloudSyncError(.config, "cannot create the directory \(directory): \(error)")
        }
    }

    /// Runs blocking file work on a dispatch queue, so the Swift concurrency pool's few threads stay free.
    static func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}
