import CloudSync
import CloudSyncFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a file the command line was told to write (a report, `report.latest`, the metrics textfile, an export) the
/// way its user expects of any path they give.
///
/// - A regular file, or a path where nothing is yet, is replaced atomically: the text goes to a temporary file in the
///   same directory (created with `mode`, so a secret export is never readable by others, even for a moment), is
///   fsynced, and is renamed over the path, so a reader sees the old file or the new one. A symlink to a regular file
///   keeps being a symlink: the file it points to is replaced.
/// - A character device or a FIFO (`/dev/null`, a named pipe, a terminal) is opened and written in place, never
///   replaced, and its mode is never touched: renaming over `/dev/null`, as root, replaced it with a regular file for
///   the whole machine. `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` are the process's own descriptors.
/// - A directory, a block device (a disk) or a socket is refused with `ERR_CONFIG` naming the path.
public enum OutputFile {
    /// Writes `text` to `path`; `what` names the file in errors ("the report").
    public static func write(_ text: String, to path: String, mode: mode_t = 0o644, what: String)
        throws(CloudSyncError)
    {
        let file = try OutputFileStream(path, mode: mode, what: what)
        try file.write(text)
        try file.commit()
    }

    /// Where writes to `path` go: a descriptor to write, and the temporary file to rename over `target` (nil when the
    /// path is written in place).
    static func open(_ path: String, mode: mode_t, what: String) throws(CloudSyncError)
        -> (descriptor: Int32, ownsDescriptor: Bool, temporary: String?, target: String)
    {
        if let descriptor = ownDescriptor(path) { return (descriptor, false, nil, path) }
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw failure(what, path, errno) }
            // Missing directories are made with the usual permissions (the umask's): a metrics textfile's directory
            // must stay readable by the collector.
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                do {
                    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                } catch {
                    throw CloudSyncError(
                        .config,
                        "\(what) could not be written to \(path): \(describeFileError(error)); check that its "
                            + "directory exists and is writable")
                }
            }
            return try temporaryBeside(path, mode: mode, what: what)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            var link = stat()
            let target =
                lstat(path, &link) == 0 && link.st_mode & S_IFMT == S_IFLNK ? ReplacedFile.resolved(path) ?? path : path
            return try temporaryBeside(target, mode: mode, what: what)
        case S_IFCHR, S_IFIFO:
            let descriptor = Glibc.open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
            guard descriptor >= 0 else { throw failure(what, path, errno) }
            return (descriptor, true, nil, path)
        case S_IFDIR:
            throw CloudSyncError(
                .config, "\(what) cannot be written to \(path): it is a directory; give the path of a file in it")
        case S_IFBLK:
            throw CloudSyncError(
                .config,
                "\(what) cannot be written to \(path): it is a block device (a disk), which writing would destroy; "
                    + "give the path of a file")
        default:
            throw CloudSyncError(
                .config, "\(what) cannot be written to \(path): it is a socket or another special file; give a file")
        }
    }

    /// The descriptor `/dev/stdout`, `/dev/stderr`, `/dev/stdin`'s siblings and `/dev/fd/N` (or `/proc/self/fd/N`)
    /// name in this process; nil for any other path.
    ///
    /// Written through the descriptor itself: resolving the link would find, for `> report.json`, a regular file the
    /// shell holds open, and replacing it would leave the shell writing to a deleted one.
    static func ownDescriptor(_ path: String) -> Int32? {
        switch path {
        case "/dev/stdout": return STDOUT_FILENO
        case "/dev/stderr": return STDERR_FILENO
        default:
            for prefix in ["/dev/fd/", "/proc/self/fd/"] where path.hasPrefix(prefix) {
                return Int32(path.dropFirst(prefix.count))
            }
            return nil
        }
    }

    /// A staged file beside `path`, created with `mode` (so a secret export is never readable by others, even for a
    /// moment), to be renamed over `path` once written.
    private static func temporaryBeside(_ path: String, mode: mode_t, what: String) throws(CloudSyncError)
        -> (descriptor: Int32, ownsDescriptor: Bool, temporary: String?, target: String)
    {
        do throws(NewFile.Failure) {
            let staged = try ReplacedFile.stage(beside: path, mode: mode)
            return (staged.descriptor, true, staged.path, path)
        } catch {
            throw failure(what, path, error.code)
        }
    }

    static func failure(_ what: String, _ path: String, _ code: Int32) -> CloudSyncError {
        let quota = code == ENOSPC || code == EDQUOT
        return CloudSyncError(
            quota ? .quotaExceeded : .config,
            "\(what) could not be written to \(path): \(describe(errno: code, path: path)); "
                + (quota ? "free space on its file system" : "check that its directory exists and is writable"))
    }
}
