import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One file per key under a root directory, holding the plain bytes of the (encoded) value, so rsync, rclone or a
/// person with `cat` can read it.
///
/// Key to file name: see `FileNameMapping`.
///
/// Writes are atomic and durable per batch: each value goes to a temporary file (unnamed, `O_TMPFILE`, where the file
/// system allows; else one whose name starts with `.`), the batch's files are made durable together, only then given
/// the keys' names (linked in, or renamed over an existing file), and each directory touched fsynced once, so a crash
/// leaves the old value or the new one, never a torn file, and a leftover temporary file is ignored. Quota is the
/// file system's (`statvfs`): its used and total bytes, shared with everything else on that file system.
public final class DirectoryProvider: Provider {
    /// The provider's name in the store, errors and reports (`directory` unless given).
    public let id: String
    /// A file-tier provider taking batches of up to 1,000 keys, listing and reporting quota; see
    /// ``capabilities(maxValueBytes:)``.
    public let capabilities: ProviderCapabilities
    /// The root directory.
    public let root: String
    /// Counts each call as one request.
    public let metrics: ProviderMetrics
    let closed = Mutex(false)
    let listings = DirectoryListings()
    let fileTimeNow: @Sendable () -> Int64

    /// A provider over `root`, created (mode 0700) when missing.
    ///
    /// With `removesStaleTemporaryFiles` (every open but a dry run's), the temporary files that writes killed midway
    /// left anywhere under the root are removed first, when older than this process (see
    /// ``removeStaleTemporaryFiles(under:olderThan:)``).
    public convenience init(
        id: String = "directory", root: String, maxValueBytes: Int? = nil, metrics: ProviderMetrics = ProviderMetrics(),
        removesStaleTemporaryFiles: Bool = true
    ) throws(CloudSyncError) {
        try self.init(
            id: id, root: root, maxValueBytes: maxValueBytes, metrics: metrics,
            removesStaleTemporaryFiles: removesStaleTemporaryFiles, fileTimeNow: FileVersion.now)
    }

    /// ``init(id:root:maxValueBytes:metrics:removesStaleTemporaryFiles:)`` with the clock its listings compare files'
    /// change times with (nanoseconds since the epoch), for tests that cannot wait out ``FileVersion`` 's window.
    init(
        id: String, root: String, maxValueBytes: Int?, metrics: ProviderMetrics, removesStaleTemporaryFiles: Bool,
        fileTimeNow: @escaping @Sendable () -> Int64
    ) throws(CloudSyncError) {
        self.fileTimeNow = fileTimeNow
        self.id = id
        self.metrics = metrics
        self.root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
        self.capabilities = Self.capabilities(maxValueBytes: maxValueBytes)
        do {
            try LocalFiles.createDirectory(self.root)
        } catch {
            throw error.attributed(provider: id)
        }
        if removesStaleTemporaryFiles {
            Self.removeStaleTemporaryFiles(under: self.root, olderThan: Self.runStarted)
        }
    }

    /// When this process started (from `/proc`, to a clock tick), or when it first opened a directory provider where
    /// `/proc` cannot tell: a temporary file older than that belongs to no write of this run.
    static let runStarted: Date = {
        var boot = timespec()
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")"), clock_gettime(CLOCK_BOOTTIME, &boot) == 0
        else { return Date() }
        // Fields after the command's closing parenthesis start at the third; the start time is the 22nd, in clock
        // ticks since boot.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return Date() }
        let sinceBoot = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9
        let age = sinceBoot - ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        return Date(timeIntervalSinceNow: -max(0, age))
    }()

    /// This process's temporary file names: `.tmp-` and 16 hex digits, a random start counted up, so no file needs
    /// random bytes of its own.
    static let temporaryNames = Atomic<UInt64>(
        SecureRandom.bytes(count: 8).reduce(0) { $0 << 8 | UInt64($1) })

    static func temporaryName() -> String {
        let number = temporaryNames.add(1, ordering: .relaxed).oldValue
        let hex = String(number, radix: 16)
        return ".tmp-" + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Removes the temporary files (`.tmp-` and 16 hex digits, regular files only) anywhere under `root` last
    /// modified before `date`, which a write killed between creating and renaming one leaves behind; returns how
    /// many went.
    ///
    /// A younger one may be another process's write in progress and stays. Symbolic links are not followed, and a
    /// file that cannot be removed is left for the next open.
    @discardableResult
    public static func removeStaleTemporaryFiles(under root: String, olderThan date: Date) -> Int {
        let cutoff = date.timeIntervalSince1970
        var removed = 0
        var pending = [root]
        while let directory = pending.popLast() {
            // Only directories and temporary names are looked at further: a key file costs its directory entry alone.
            _ = DirectoryEntries.forEach(in: directory) { name, type, _ in
                guard type == DirectoryEntries.unknown || type == DirectoryEntries.directory || isTemporaryName(name)
                else { return }
                let path = directory + "/" + String(decoding: name, as: UTF8.self)
                var status = stat()
                guard lstat(path, &status) == 0 else { return }
                switch status.st_mode & S_IFMT {
                case S_IFDIR:
                    pending.append(path)
                case S_IFREG where isTemporaryName(name):
                    let modified = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
                    if modified < cutoff, unlink(path) == 0 { removed += 1 }
                default:
                    return
                }
            }
        }
        return removed
    }

    static func isTemporaryName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        name.count == 21 && name.starts(with: ".tmp-".utf8)
            && name.dropFirst(5).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// What a directory provider can do; the pipeline planner reads it before any directory is created.
    ///
    /// Batches of up to 1,000 keys: each batch pays one `syncfs` (which flushes the whole file system) and one
    /// `fsync` per directory touched, so larger batches pay them less often.
    ///
    /// Keys are at most ``maxKeyBytes`` bytes of UTF-8, refused before any file is touched: escaped, a longer key's
    /// path would pass the kernel's 4,096-byte limit.
    public static func capabilities(maxValueBytes: Int?) -> ProviderCapabilities {
        ProviderCapabilities(
            maxValueBytes: maxValueBytes, tier: .file, keyRules: [.maxUTF8Bytes(maxKeyBytes)], batchLimit: 1000,
            canList: true, reportsQuota: true, listsInKeyOrder: true, cursorIsKey: true, conditionalWrites: true)
    }

    /// The longest key, in UTF-8 bytes, as S3 allows: escaped (up to three bytes each) and cut into pieces, its path
    /// stays well inside the 4,096 bytes the kernel takes.
    public static let maxKeyBytes = 1024

    /// Stops serving.
    ///
    /// Later calls fail with `ERR_CLOSED` and ``availability()`` reports it; closing twice is harmless. The provider keeps no file open between calls, so a call already running finishes normally.
    public func close() async { closed.withLock { $0 = true } }

    func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(
                .closed, "the directory provider \(id) was closed; open a new provider on \(root) to use it again",
                provider: id)
        }
    }

    /// Available while the root is an existing directory this user can read, write and enter; otherwise why not:
    /// `closed` after ``close()``, `offline` when the root is missing (an unmounted disk), `misconfigured` when it is
    /// not a directory or its permissions forbid access.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) {
            return .unavailable(
                .closed, "the directory provider \(id) was closed; open a new provider on \(root) to use it again")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
            return .unavailable(.offline, "the directory \(root) does not exist; mount or create it")
        }
        guard isDirectory.boolValue else {
            return .unavailable(.misconfigured, "\(root) is not a directory; point the provider at a directory")
        }
        guard access(root, R_OK | W_OK | X_OK) == 0 else {
            return .unavailable(
                .misconfigured, "the directory \(root) is not readable and writable by this user; fix its permissions")
        }
        return .available
    }

    func path(of key: String) -> String {
        ([root] + FileNameMapping.components(of: FileNameMapping.encode(key))).joined(separator: "/")
    }

    /// Opens the directory that holds a key's file, component by component from the root, never following a
    /// symbolic link (`O_NOFOLLOW` on every component), so nothing planted in the root can lead a read or a write
    /// out of it; `creating` makes missing directories (mode 0700) and names, in `created`, the parent of each.
    ///
    /// Answers the directory's descriptor (the caller closes it) and its path; nil when a directory is missing and
    /// `creating` is false (the key has no file).
    func openDirectory(
        _ pieces: ArraySlice<String>, creating: Bool, key: String, created: inout [String]
    ) -> Result<(descriptor: Int32, path: String)?, CloudSyncError> {
        var descriptor = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            return errno == ENOENT && !creating ? .success(nil) : .failure(failure("open", root, errno, key: key))
        }
        var path = root
        for piece in pieces {
            let parent = path
            path += "/" + piece
            if creating {
                if mkdirat(descriptor, piece, 0o700) == 0 {
                    created.append(parent)
                } else if errno != EEXIST {
                    let code = errno
                    Glibc.close(descriptor)
                    return .failure(failure("create the directory", path, code, key: key))
                }
            }
            let next = openat(descriptor, piece, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            Glibc.close(descriptor)
            guard next >= 0 else {
                if code == ENOENT && !creating { return .success(nil) }
                if code == ELOOP || code == ENOTDIR { return .failure(notOurs(path, what: "a directory", key: key)) }
                return .failure(failure("open the directory", path, code, key: key))
            }
            descriptor = next
        }
        return .success((descriptor, path))
    }

    /// `ERR_PROVIDER`: something other than what the provider made sits where it keeps a key's file or directory.
    func notOurs(_ path: String, what: String, key: String) -> CloudSyncError {
        CloudSyncError(
            .provider,
            "\(path) is not \(what) this provider made (a symbolic link, device, FIFO or other file); it never follows "
                + "links or reads special files, so nothing under the root can reach outside it. Remove it",
            provider: id, key: key)
    }

    func failure(_ action: String, _ path: String, _ code: Int32, key: String? = nil) -> CloudSyncError {
        let reason = String(cString: strerror(code))
        let errorCode: ErrorCode = code == ENOSPC || code == EDQUOT ? .quotaExceeded : .provider
        return CloudSyncError(errorCode, "cannot \(action) \(path): \(reason)", provider: id, key: key)
    }

}
