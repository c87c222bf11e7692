#if canImport(Glibc)
    import Glibc
#endif

/// New files written whole through POSIX calls, never replacing anything.
///
/// For the modules that write files a person named: key files, starter pipelines, a directory provider's values. No
/// Foundation, so the lowest layers may use it.
package enum NewFile {
    /// Why ``create(_:bytes:mode:)`` did not create the file: the `errno`, and whether the bytes were being written
    /// (rather than the name being created).
    package struct Failure: Error, Equatable {
        package let code: Int32
        package let writing: Bool
    }

    /// Writes all of `bytes` to `descriptor`, resuming after interruptions; 0, or the `errno` that stopped it.
    package static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32 {
        var written = 0
        while written < bytes.count {
            let result = write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 {
                if errno == EINTR { continue }
                return errno
            }
            written += result
        }
        return 0
    }

    /// Creates `path` holding `bytes` (with `mode`, less the umask), whole or not at all, and never replaces anything
    /// there, even a file a racing writer creates meanwhile (`EEXIST` then).
    ///
    /// The bytes go to a new temporary file beside it, which is synced and then linked to the name (`link(2)` fails
    /// when the name exists); the directory is synced after. On a file system without hard links, the name itself is
    /// created with `O_EXCL` and written, and removed again when the write fails.
    package static func create(_ path: String, bytes: UnsafeRawBufferPointer, mode: mode_t) throws(Failure) {
        let temporary =
            FilePaths.directory(of: path) + "/." + FilePaths.name(of: path) + ".new-"
            + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        try writeNew(temporary, bytes: bytes, mode: mode)
        defer { unlink(temporary) }
        if link(temporary, path) != 0 {
            let code = errno
            // A file system without hard links: create the name itself, still never replacing what is there.
            guard [EPERM, EOPNOTSUPP, ENOSYS].contains(code) else { throw Failure(code: code, writing: false) }
            try writeNew(path, bytes: bytes, mode: mode, removingOnFailure: true)
        }
        FilePaths.syncDirectory(of: path)
    }

    /// Creates `path` (which must not exist), writes `bytes` and syncs them.
    private static func writeNew(
        _ path: String, bytes: UnsafeRawBufferPointer, mode: mode_t, removingOnFailure: Bool = false
    )
        throws(Failure)
    {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw Failure(code: errno, writing: false) }
        var failure = writeAll(bytes, to: descriptor)
        if failure == 0, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        guard failure == 0 else {
            if removingOnFailure { unlink(path) }
            throw Failure(code: failure, writing: true)
        }
    }
}
