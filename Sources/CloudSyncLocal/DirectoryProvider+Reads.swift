import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Reading values: one file per key, read whole with its status, several keys at once.
extension DirectoryProvider {
    /// Reads each key's file, positionally: nil for a key with no file, `ERR_DECODE` for a file that is not UTF-8 text,
    /// `ERR_PROVIDER` for any other read failure.
    ///
    /// Several files are read at once (`readWidth(forKeys:)`). Throws `ERR_CLOSED` after ``close()``.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try await readEach(keys) { value, _ in value }
    }

    /// Reads each key's file as ``get(_:)`` does, several at once, answering what `answer` makes of its value and
    /// the status of the file it was read from; counts one request and the bytes read.
    func readEach<Answer: Sendable>(
        _ keys: [String], _ answer: @escaping @Sendable (String, stat) -> Answer
    ) async throws -> [Result<Answer?, CloudSyncError>] {
        try ensureOpen()
        let results = try await LocalFiles.offload { [self] in
            LocalFiles.concurrentMap(keys.count, width: Self.readWidth(forKeys: keys.count)) { [self] index in
                readWithStatus(keys[index]).map { read in
                    read.map { (answer: answer($0.value, $0.status), bytes: $0.value.utf8.count) }
                }
            }
        }
        metrics.recordRequest(bytesRead: results.reduce(0) { $0 + ((try? $1.get())??.bytes ?? 0) })
        return results.map { result in result.map { $0?.answer } }
    }

    /// How many files a batch get reads at once: two for a few keys, up to 16 for a large batch (one thread per 32
    /// keys).
    ///
    /// Files not in the page cache (a migrate's source, read once; or dropped from the cache, as `rclone` asks for
    /// the files it read) each wait for the disk, and a disk serves many reads at once: 5,000 such files of 1 KB took
    /// 0.23-0.29 s two at a time and 0.09 s sixteen at a time here. A thread costs tens of microseconds to start, so a
    /// small batch keeps to two.
    static func readWidth(forKeys count: Int) -> Int {
        min(16, max(2, count / 32))
    }

    /// `key`'s value with the status of the file it was read from (for its version tag); nil when it has no file.
    func readWithStatus(_ key: String) -> Result<(value: String, status: stat)?, CloudSyncError> {
        let opened: (descriptor: Int32, path: String, info: stat)
        switch openForReading(key) {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success(nil)
        case .success(let file?): opened = file
        }
        let (descriptor, path, info) = opened
        defer { Glibc.close(descriptor) }
        // No value is larger than the provider takes: a file past that (or growing past it while read) is refused
        // rather than read until memory runs out.
        let limit = capabilities.maxValueBytes ?? Int.max
        guard Int(info.st_size) <= limit else {
            return .failure(
                CloudSyncError(
                    .payloadTooLarge,
                    "\(path) holds \(info.st_size) bytes, more than the \(limit) this provider takes; it is not a value "
                        + "this provider wrote",
                    provider: id, key: key))
        }
        // Into one buffer the file's size and a byte more (its end then shows in the second read), grown if the
        // file grows meanwhile; validated as UTF-8 straight from it.
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(Int(info.st_size) + 1, 64), alignment: 1)
        defer { buffer.deallocate() }
        var filled = 0
        while true {
            if filled > limit {
                return .failure(
                    CloudSyncError(
                        .payloadTooLarge, "\(path) grew past the \(limit) bytes this provider takes while it was read",
                        provider: id, key: key))
            }
            if filled == buffer.count {
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: buffer.count * 2, alignment: 1)
                larger.copyMemory(from: UnsafeRawBufferPointer(buffer))
                buffer.deallocate()
                buffer = larger
            }
            let count = Glibc.read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(failure("read", path, errno, key: key))
            }
            if count == 0 { break }
            filled += count
        }
        let bytes = UnsafeBufferPointer(start: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: filled)
        guard let value = String(validating: bytes, as: UTF8.self) else {
            return .failure(
                CloudSyncError(.decode, "\(path) does not hold UTF-8 text; values are strings", provider: id, key: key))
        }
        return .success((value, info))
    }

    /// Opens `key`'s file for reading: its descriptor, path and status; nil when the key has no file, and a failure
    /// for a link or anything else that is not a regular file (planted, not written here).
    func openForReading(_ key: String) -> Result<(descriptor: Int32, path: String, info: stat)?, CloudSyncError> {
        let components = FileNameMapping.components(of: FileNameMapping.encode(key))
        var created: [String] = []
        let parent: (descriptor: Int32, path: String)
        switch openDirectory(components.dropLast(), creating: false, key: key, created: &created) {
        case .failure(let error): return .failure(error)
        case .success(nil): return .success(nil)
        case .success(let opened?): parent = opened
        }
        let path = parent.path + "/" + components.last!
        // O_NOFOLLOW: a planted link is refused, not served; O_NONBLOCK: opening a FIFO does not wait for a writer.
        let descriptor = openat(
            parent.descriptor, components.last!, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        let code = errno
        Glibc.close(parent.descriptor)
        guard descriptor >= 0 else {
            if code == ENOENT { return .success(nil) }
            if code == ELOOP { return .failure(notOurs(path, what: "a file", key: key)) }
            return .failure(failure("read", path, code, key: key))
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            return .failure(failure("read", path, code, key: key))
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(descriptor)
            return .failure(notOurs(path, what: "a file", key: key))
        }
        return .success((descriptor, path, info))
    }
}
