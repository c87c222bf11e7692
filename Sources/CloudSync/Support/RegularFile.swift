import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads small files a person names (a pipeline file, a `${file:…}`, a credentials file) without ever blocking or
/// reading without bound: anything that is not a regular file (a FIFO, a device, a directory) is refused before a
/// byte is read, and a file larger than the caller's limit is refused by its size.
public enum RegularFile {
    /// Why a file could not be read, in words that follow its path ("is not a regular file (a FIFO)").
    public struct Failure: Error, Sendable, Equatable {
        /// What went wrong, to follow the file's path in a message.
        public var reason: String
        /// The file's size, when it was refused for being larger than the limit.
        public var size: Int?
    }

    /// The bytes of the regular file at `path`, at most `maximumBytes` of them.
    public static func read(_ path: String, maximumBytes: Int) throws(Failure) -> Data {
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the fstat below refuses it.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { throw Failure(reason: describe(errno)) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Failure(reason: describe(errno)) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw Failure(reason: "is not a regular file (\(kind(of: status.st_mode)))")
        }
        guard status.st_size <= maximumBytes else {
            throw Failure(reason: "is \(status.st_size) bytes", size: Int(status.st_size))
        }
        var data = Data(count: Int(status.st_size) + 1)
        var filled = 0
        // Read to the end, but never past the limit, in case the file grows while it is read.
        while filled < data.count {
            let got = data.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress! + filled, $0.count - filled)
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw Failure(reason: describe(errno))
            }
            if got == 0 { break }
            filled += got
            if filled == data.count, data.count <= maximumBytes {
                data.count = min(data.count * 2, maximumBytes + 1)
            }
        }
        guard filled <= maximumBytes else {
            throw Failure(reason: "is more than \(maximumBytes) bytes", size: filled)
        }
        data.count = filled
        return data
    }

    private static func describe(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "does not exist"
        case EACCES, EPERM: return "cannot be read (permission denied)"
        case EISDIR: return "is not a regular file (a directory)"
        case ENOTDIR: return "does not exist (a part of its path is not a directory)"
        default: return "cannot be read (\(String(cString: strerror(code))))"
        }
    }

    /// A file type in words, to follow "is": "a directory", "a FIFO".
    static func kind(of mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a directory"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        case S_IFLNK: return "a symbolic link"
        default: return "a special file"
        }
    }
}
