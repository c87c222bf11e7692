#if canImport(Glibc)
    import Glibc
#endif

/// The frames a ``JQSandbox`` and its worker process exchange over one socket: a kind byte, a 32-bit little-endian
/// length, then that many bytes.
///
/// The parent sends the program (``Kind/program``), then values (``Kind/value``) in batches, each closed by
/// ``Kind/batchEnd``. The worker answers the program with ``Kind/compiled`` or ``Kind/compileError``. It reads a whole
/// batch before it answers any of it, so the parent's sending never waits on a worker that waits for its answers to
/// be read, whatever the socket's buffers hold. It then answers each value with its outputs (``Kind/output``),
/// ``Kind/more`` when it had more than asked for, ``Kind/error`` when one stopped it, and always ``Kind/done``.
struct JQFrames {
    /// What a frame carries.
    enum Kind: UInt8 {
        case program = 0x70  // p
        case value = 0x76  // v
        case batchEnd = 0x62  // b
        case compiled = 0x63  // c
        case compileError = 0x78  // x
        case output = 0x6F  // o
        case more = 0x6D  // m
        case error = 0x65  // e
        case done = 0x64  // d
    }

    /// The largest frame either side accepts: more than any provider's value.
    static let maxLength = 1 << 30

    let input: Int32
    let output: Int32

    /// Writes one frame; false when the other side is gone (never SIGPIPE: sockets are written with MSG_NOSIGNAL).
    func write(_ kind: Kind, _ bytes: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> Bool {
        let length = UInt32(bytes.count)
        let header: [UInt8] = [
            kind.rawValue, UInt8(length & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length >> 16 & 0xFF),
            UInt8(length >> 24),
        ]
        return header.withUnsafeBytes { sendAll($0) } && sendAll(bytes)
    }

    /// Writes one frame holding `text`'s UTF-8.
    func write(_ kind: Kind, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { write(kind, UnsafeRawBufferPointer($0)) }
    }

    /// The next frame; nil at the end of the stream, on an error, or for a frame that is malformed or too long.
    func read() -> (kind: Kind, bytes: [UInt8])? {
        var header = [UInt8](repeating: 0, count: 5)
        guard readAll(&header), let kind = Kind(rawValue: header[0]) else { return nil }
        let length = Int(header[1]) | Int(header[2]) << 8 | Int(header[3]) << 16 | Int(header[4]) << 24
        guard length <= Self.maxLength else { return nil }
        var bytes = [UInt8](repeating: 0, count: length)
        guard readAll(&bytes) else { return nil }
        return (kind, bytes)
    }

    private func sendAll(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0 else { return true }
        var offset = 0
        while offset < bytes.count {
            let sent = send(output, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    private func readAll(_ bytes: inout [UInt8]) -> Bool {
        let count = bytes.count
        return bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < count {
                let got = Glibc.read(input, buffer.baseAddress! + offset, count - offset)
                if got < 0, errno == EINTR { continue }
                guard got > 0 else { return false }
                offset += got
            }
            return true
        }
    }
}
