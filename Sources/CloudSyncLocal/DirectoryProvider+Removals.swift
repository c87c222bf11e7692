import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Removing values, each under its directory's lock when a condition is given.
extension DirectoryProvider {
    /// Deletes each key's file, positionally, then fsyncs each directory touched once; a key with no file succeeds.
    ///
    /// Throws `ERR_CLOSED` after ``close()``.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await remove(keys, conditions: keys.map { _ in nil })
    }

    /// Deletes each key's file if its condition (if any) holds for the file there, checked under the directory's lock.
    ///
    /// The lock is an exclusive `flock` of the key's directory, which every write and removal of this provider takes.
    /// A key with no file succeeds. Throws `ERR_CLOSED` after ``close()``.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try ensureOpen()
        metrics.recordRequest()
        return try await LocalFiles.offload { [self] in
            var touched = Set<StoreKey>()
            let results = zip(keys, conditions).map { key, condition -> Result<Void, CloudSyncError> in
                let components = FileNameMapping.components(of: FileNameMapping.encode(key))
                var created: [String] = []
                let parent: (descriptor: Int32, path: String)
                switch openDirectory(components.dropLast(), creating: false, key: key, created: &created) {
                case .failure(let error): return .failure(error)
                case .success(nil): return .success(())
                case .success(let opened?): parent = opened
                }
                defer { Glibc.close(parent.descriptor) }
                let name = components.last!
                let path = parent.path + "/" + name
                let removed = withDirectoryLock(parent.descriptor) { () -> Result<Void, CloudSyncError> in
                    if let condition {
                        switch currentTag(of: name, in: parent.descriptor, path: path, key: key) {
                        case .failure(let error): return .failure(error)
                        case .success(nil): return .success(())
                        case .success(let tag?):
                            guard condition.holds(forTag: tag) else {
                                return .failure(condition.unmet(key: key, provider: id))
                            }
                        }
                    }
                    // unlinkat removes a link itself, never what it points to.
                    guard unlinkat(parent.descriptor, name, 0) == 0 else {
                        return errno == ENOENT ? .success(()) : .failure(failure("remove", path, errno, key: key))
                    }
                    touched.insert(StoreKey(parent.path))
                    return .success(())
                }
                return removed
            }
            LocalFiles.syncDirectories(touched.map(\.string))
            return results
        }
    }
}
