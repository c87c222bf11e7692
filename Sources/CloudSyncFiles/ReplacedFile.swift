#if canImport(Glibc)
    import Glibc
#endif

/// Replacing a file whole: the new bytes go to a staged file beside it, which is made durable and renamed over it, so
/// a reader finds the old file or the whole new one, never part of one.
///
/// Shared by the writers of files a person named (a file a get writes, a report, an export); each decides which paths
/// it takes (a device is never renamed over) and words the `errno` its way.
package enum ReplacedFile {
    /// The file a chain of symlinks ends at; nil, with `errno` set, when it cannot be resolved.
    package static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// Creates an empty file beside `target` (`.NAME.cloudsync-XXXXXX`, mode 0600, or `mode` when given) and answers
    /// its descriptor, open for writing, and its path.
    package static func stage(beside target: String, mode: mode_t? = nil) throws(NewFile.Failure)
        -> (descriptor: Int32, path: String)
    {
        let prefix = FilePaths.directory(of: target) + "/." + FilePaths.name(of: target)
        var template = Array((prefix + ".cloudsync-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw NewFile.Failure(code: errno, writing: false) }
        // mkstemp replaced the X's in place.
        let staged = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        if let mode, fchmod(descriptor, mode) != 0 {
            let code = errno
            close(descriptor)
            unlink(staged)
            throw NewFile.Failure(code: code, writing: false)
        }
        return (descriptor, staged)
    }

    /// Syncs `descriptor` (the staged file's, which this closes), renames `staged` over `target` and syncs the
    /// directory; on a failure the staged file is removed and `target` keeps what it held.
    package static func commit(_ staged: String, syncing descriptor: Int32, over target: String)
        throws(NewFile.Failure)
    {
        let synced = fsync(descriptor) == 0
        let code = errno
        close(descriptor)
        guard synced else {
            unlink(staged)
            throw NewFile.Failure(code: code, writing: true)
        }
        guard rename(staged, target) == 0 else {
            let code = errno
            unlink(staged)
            throw NewFile.Failure(code: code, writing: false)
        }
        FilePaths.syncDirectory(of: target)
    }
}
