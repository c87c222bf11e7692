import CloudSync

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a file for the chunker a window at a time: the window always holds the next `min(remaining, span)` bytes,
/// which is all a cut depends on, and never more than twice `span`.
final class FileWindow {
    private let descriptor: Int32
    private let path: String
    private let key: String
    private let span: Int
    /// Bytes of the file not yet handed out as chunks.
    private var remaining: Int
    private var buffer: [UInt8] = []
    /// Where the unhanded bytes start in `buffer`.
    private var start = 0

    init(path: String, key: String, size: Int, span: Int) throws(CloudSyncError) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.failure(path, key: key, errno) }
        self.path = path
        self.key = key
        self.span = span
        remaining = size
        buffer.reserveCapacity(2 * span)
    }

    deinit { close(descriptor) }

    /// The next chunk, its length chosen by `cut` from the window; nil at the end of the file.
    func next(cut: (UnsafeRawBufferPointer) -> Int) throws(CloudSyncError) -> ArraySlice<UInt8>? {
        guard remaining > 0 else { return nil }
        let wanted = min(remaining, span)
        if buffer.count - start < wanted {
            // Keep the unhanded bytes, then fill to two spans (or the file's end).
            buffer.removeSubrange(0..<start)
            start = 0
            try fill(to: min(2 * span, remaining))
        }
        let length = buffer[start..<(start + wanted)].withUnsafeBytes { cut($0) }
        let chunk = buffer[start..<(start + length)]
        start += length
        remaining -= length
        return chunk
    }

    /// Reads until the buffer holds `count` bytes; `ERR_CONFIG` when the file ends sooner (it shrank meanwhile).
    private func fill(to count: Int) throws(CloudSyncError) {
        let had = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: count - had))
        var filled = had
        while filled < count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + filled, count - filled) }
            if got < 0 {
                if errno == EINTR { continue }
                throw Self.failure(path, key: key, errno)
            }
            guard got > 0 else {
                throw CloudSyncError(
                    .config, "\(path) shrank while it was backed up; back it up again once it is written", key: key)
            }
            filled += got
        }
    }

    /// All `size` bytes of the file at `path`.
    static func bytes(of path: String, key: String, size: Int) throws(CloudSyncError) -> [UInt8] {
        let window = try FileWindow(path: path, key: key, size: size, span: max(1, size))
        return Array(try window.next { $0.count } ?? [])
    }

    private static func failure(_ path: String, key: String, _ code: Int32) -> CloudSyncError {
        CloudSyncError(.config, "cannot read \(path): \(String(cString: strerror(code)))", key: key)
    }
}
