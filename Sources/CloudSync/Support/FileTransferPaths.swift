import CloudSyncFiles

#if canImport(Glibc)
    import Glibc
#endif

/// The file a put (or a backup) reads: a regular file, measured before anything is sent.
package enum SourceFile {
    /// The size of the regular file at `path` (links followed); `ERR_CONFIG` naming the path when it is missing,
    /// unreadable or not a regular file (a FIFO would block, a device would never end).
    package static func size(of path: String, key: String) throws(CloudSyncError) -> Int64 {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            throw CloudSyncError(
                .config, "cannot read \(path): \(describe(errno: code, path: path)); give the path of a file to store",
                key: key)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw CloudSyncError(
                .config,
                "\(path) is \(RegularFile.kind(of: info.st_mode)), not a regular file; give the path of a file to store",
                key: key)
        }
        guard access(path, R_OK) == 0 else {
            let code = errno
            throw CloudSyncError(.config, "cannot read \(path): \(describe(errno: code, path: path))", key: key)
        }
        return Int64(info.st_size)
    }
}

/// Where a get writes: a regular file replaced whole, through a temporary file beside it.
///
/// Only a regular file, a symlink to one, or a path where nothing is yet (in an existing directory) is taken. Anything
/// else is refused before a byte is read: renaming over a device (`/dev/null`, as root) replaces it for the whole
/// machine, and a directory or a pipe is not a file to replace.
struct FileDestination {
    /// The regular file to replace (a symlink's end), or the new file's path.
    let target: String
    /// The permissions the file gets: those of the file it replaces, else 0644.
    let mode: mode_t
    private let key: String

    /// Checks `path` for `key`'s file; `ERR_CONFIG` naming the path when it cannot take one.
    init(_ path: String, key: String) throws(CloudSyncError) {
        self.key = key
        var info = stat()
        if lstat(path, &info) != 0 {
            let code = errno
            guard code == ENOENT else { throw Self.failure(path, code, key: key) }
            var parent = stat()
            guard stat(FilePaths.directory(of: path), &parent) == 0 else {
                throw Self.failure(path, errno, key: key)
            }
            guard parent.st_mode & S_IFMT == S_IFDIR else { throw Self.failure(path, ENOTDIR, key: key) }
            target = path
            mode = 0o644
            return
        }
        var resolved = path
        if info.st_mode & S_IFMT == S_IFLNK {
            guard let real = ReplacedFile.resolved(path) else { throw Self.failure(path, errno, key: key) }
            resolved = real
            guard stat(resolved, &info) == 0 else { throw Self.failure(path, errno, key: key) }
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw CloudSyncError(
                .config,
                "cannot write the file to \(path): it is \(RegularFile.kind(of: info.st_mode)), which would be replaced; "
                    + "give the path of a regular file, or of a new one",
                key: key)
        }
        target = resolved
        mode = info.st_mode & 0o7777
    }

    /// A new, empty temporary file beside the target (mode 0600 until committed), for a provider to fill.
    func stage() throws(CloudSyncError) -> String {
        do throws(NewFile.Failure) {
            let staged = try ReplacedFile.stage(beside: target)
            close(staged.descriptor)
            return staged.path
        } catch {
            throw Self.failure(target, error.code, key: key)
        }
    }

    /// Makes `staged` durable with the target's permissions and renames it over the target; answers its size.
    func commit(_ staged: String) throws(CloudSyncError) -> Int64 {
        let descriptor = open(staged, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            discard(staged)
            throw Self.failure(target, code, key: key)
        }
        var info = stat()
        let prepared = fstat(descriptor, &info) == 0 && fchmod(descriptor, mode) == 0
        let code = errno
        guard prepared, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            discard(staged)
            throw Self.failure(target, prepared ? EINVAL : code, key: key)
        }
        do throws(NewFile.Failure) {
            try ReplacedFile.commit(staged, syncing: descriptor, over: target)
        } catch {
            throw Self.failure(target, error.code, key: key)
        }
        return Int64(info.st_size)
    }

    /// Removes a staged file that will not be committed.
    func discard(_ staged: String) {
        unlink(staged)
    }

    private static func failure(_ path: String, _ code: Int32, key: String) -> CloudSyncError {
        let quota = code == ENOSPC || code == EDQUOT
        return CloudSyncError(
            quota ? .quotaExceeded : .config,
            "cannot write the file to \(path): \(describe(errno: code, path: path)); "
                + (quota ? "free space on its file system" : "check that its directory exists and is writable"),
            key: key)
    }
}
