import CloudSync
import CloudSyncFiles
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

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

    /// Writes all of `text`'s UTF-8 bytes to `descriptor`, resuming after interruptions; 0, or the `errno` that
    /// stopped it.
    static func writeAll(_ text: String, to descriptor: Int32) -> Int32 {
        var text = text
        return text.withUTF8 { NewFile.writeAll(UnsafeRawBufferPointer($0), to: descriptor) }
    }

    /// Copies everything `source` reads until its end to `destination`, resuming after interruptions; the bytes
    /// copied, or the `errno` that stopped it.
    ///
    /// The kernel copies (`copy_file_range(2)`: no bytes through this process, and a file system that can share
    /// extents shares them); where it cannot (another file system, an old kernel, a pipe), the rest goes through a
    /// 1 MiB buffer, so a file of any size takes one chunk of memory.
    static func copyAll(from source: Int32, to destination: Int32) -> Result<Int64, Errno> {
        let chunk = 1 << 20
        var copied: Int64 = 0
        if let kernelCopy = fileRangeCopy {
            while true {
                let count = kernelCopy(source, nil, destination, nil, 1 << 30, 0)
                if count > 0 {
                    copied += Int64(count)
                    continue
                }
                if count == 0 { return .success(copied) }
                if errno == EINTR { continue }
                // Not here (another file system before Linux 5.19, a special file): the buffer takes over where the
                // kernel stopped, the offsets being the files' own.
                guard [ENOSYS, EXDEV, EINVAL, EOPNOTSUPP, EBADF].contains(errno) else { return .failure(Errno(errno)) }
                break
            }
        }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(source, buffer, chunk)
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(Errno(errno))
            }
            if count == 0 { return .success(copied) }
            var offset = 0
            while offset < count {
                let written = Glibc.write(destination, buffer + offset, count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return .failure(Errno(errno))
                }
                offset += written
            }
            copied += Int64(count)
        }
    }

    /// An `errno` as an `Error`, for a `Result`.
    struct Errno: Error {
        let code: Int32
        init(_ code: Int32) { self.code = code }
    }

    /// Runs blocking file work on a dispatch queue, so the Swift concurrency pool's few threads stay free.
    static func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Runs `body` for each index in `0..<count` on up to `width` threads (this one included) and returns the results
    /// in index order.
    ///
    /// For blocking file calls (`open`, `write`, `fsync`): while one thread waits on the disk, the others proceed.
    static func concurrentMap<T: Sendable>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        let workers = min(max(width, 1), count)
        guard workers > 1 else { return (0..<count).map(body) }
        let slots = Protected([T?](repeating: nil, count: count))
        let next = Atomic(0)
        let work: @Sendable () -> Void = {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < count else { return }
                let result = body(index)
                slots.withLock { $0[index] = result }
            }
        }
        let group = DispatchGroup()
        for _ in 1..<workers {
            group.enter()
            Thread.detachNewThread {
                work()
                group.leave()
            }
        }
        work()
        group.wait()
        return slots.withLock { $0.map { $0! } }
    }

    /// Makes the data of every open file in `descriptors` durable and returns, per descriptor, 0 or the `errno` of
    /// its failure.
    ///
    /// Several files on one file system take a single `syncfs(2)` (one journal commit for all of them); otherwise,
    /// or when `syncfs` fails, each file gets its own `fsync`, several at a time, so one failure is pinned on its
    /// file.
    ///
    /// `directories` are those holding the files: when they all are on one file system, so are the files.
    static func makeDurable(_ descriptors: [Int32], in directories: some Collection<String>) -> [Int32] {
        if descriptors.count > 1, let syncfs = fileSystemSync, onOneFileSystem(directories),
            syncfs(descriptors[0]) == 0
        {
            return Array(repeating: 0, count: descriptors.count)
        }
        return concurrentMap(descriptors.count, width: 16) { index in
            fsync(descriptors[index]) == 0 ? 0 : errno
        }
    }

    /// Makes the entries of each directory (new, renamed or removed names) durable, several at a time.
    ///
    /// A directory that cannot be opened or synced is skipped, as the single-file path always did: its files' data
    /// is already durable.
    static func syncDirectories(_ directories: some Collection<String>) {
        let paths = Array(directories)
        _ = concurrentMap(paths.count, width: 8) { index in
            let descriptor = open(paths[index], O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            fsync(descriptor)
            Glibc.close(descriptor)
        }
    }

    /// glibc's `copy_file_range(2)`, which Swift's Glibc module leaves out (declared only under `_GNU_SOURCE`); looked
    /// up once by name, nil where the C library lacks it.
    private static let fileRangeCopy:
        (@convention(c) (Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32) -> Int)? =
            {
                guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "copy_file_range") else { return nil }
                return unsafeBitCast(
                    symbol,
                    to: (@convention(c) (
                        Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32
                    )
                        -> Int).self)
            }()

    /// glibc's `syncfs(2)`, which Swift's Glibc module leaves out (it is declared only under `_GNU_SOURCE`); looked up
    /// once by name, nil where the C library lacks it.
    private static let fileSystemSync: (@convention(c) (Int32) -> Int32)? = {
        // RTLD_DEFAULT: search every object the process has loaded.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "syncfs") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Int32).self)
    }()

    private static func onOneFileSystem(_ directories: some Collection<String>) -> Bool {
        var device: dev_t?
        for directory in directories {
            var info = stat()
            guard stat(directory, &info) == 0 else { return false }
            if let device, device != info.st_dev { return false }
            device = info.st_dev
        }
        return true
    }
}
