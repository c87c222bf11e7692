import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reads parts of a file by offset (`pread`), from any thread at once.
package final class FilePartReader: Sendable {
    private let handle: FileHandle
    private let path: String
    private let provider: String
    private let key: String

    /// Opens `path` for the part reads of `key`'s upload to `provider`; `ERR_CONFIG` when it cannot be read.
    package init(path: String, provider: String, key: String) throws(CloudSyncError) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CloudSyncError(.config, "cannot read \(path)", provider: provider, key: key)
        }
        self.handle = handle
        self.path = path
        self.provider = provider
        self.key = key
    }

    deinit { try? handle.close() }

    /// `count` bytes from `offset`; `ERR_CONFIG` when the file ends sooner (it shrank while it was sent).
    package func read(at offset: Int64, count: Int) throws(CloudSyncError) -> Data {
        var data = Self.mappedBuffer(count)
        var filled = 0
        while filled < count {
            let got = data.withUnsafeMutableBytes { buffer in
                pread(
                    handle.fileDescriptor, buffer.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled))
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw CloudSyncError(
                    .config, "cannot read \(path): \(String(cString: strerror(errno)))", provider: provider, key: key)
            }
            if got == 0 {
                throw CloudSyncError(
                    .config, "\(path) shrank while it was being stored; store it again once it is written",
                    provider: provider, key: key)
            }
            filled += got
        }
        return data
    }

    /// `count` zeroed bytes in pages of their own (`mmap`), handed back to the system (`munmap`) when the last copy
    /// of the data goes: parts of several MiB from the heap would leave freed parts' pages held by the allocator
    /// (glibc raises its mmap threshold past the first large block freed), so peak memory would grow past the parts
    /// in flight.
    static func mappedBuffer(_ count: Int) -> Data {
        guard count > 0,
            let pages = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            pages != MAP_FAILED
        else { return Data(count: count) }
        return Data(bytesNoCopy: pages, count: count, deallocator: .custom { pointer, size in munmap(pointer, size) })
    }
}
