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
///
/// Both directions are buffered: frames written wait in memory until ``flush()`` (or until 64 KiB wait), and reads
/// take what the socket holds in one call, so a value costs a few bytes of copying rather than system calls. Used by one
/// thread at a time: the worker's, or the sandbox's queue under its lock.
final class JQFrames: @unchecked Sendable {
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
    private var outbox: [UInt8] = []
    private var inbox: [UInt8] = []
    /// Where the unread part of ``inbox`` starts.
    private var next = 0
    /// The bytes that wait before a write sends them without a ``flush()``.
    private static let outboxLimit = 64 << 10

    init(input: Int32, output: Int32) {
        self.input = input
        self.output = output
        outbox.reserveCapacity(Self.outboxLimit)
    }

    /// Adds one frame to what is sent; false when the other side is gone (never SIGPIPE: sockets are written with
    /// MSG_NOSIGNAL).
    func write(_ kind: Kind, _ bytes: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> Bool {
        let length = UInt32(bytes.count)
        outbox += [
            kind.rawValue, UInt8(length & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length >> 16 & 0xFF),
            UInt8(length >> 24),
        ]
        outbox.append(contentsOf: bytes)
        return outbox.count < Self.outboxLimit || flush()
    }

    /// Adds one frame holding `text`'s UTF-8.
    func write(_ kind: Kind, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { write(kind, UnsafeRawBufferPointer($0)) }
    }

    /// Sends every frame written so far; false when the other side is gone.
    func flush() -> Bool {
        defer { outbox.removeAll(keepingCapacity: true) }
        return outbox.withUnsafeBytes { sendAll($0) }
    }

    /// The next frame; nil at the end of the stream, on an error, or for a frame that is malformed or too long.
    func read() -> (kind: Kind, bytes: [UInt8])? {
        guard fill(5), let kind = Kind(rawValue: inbox[next]) else { return nil }
        let length =
            Int(inbox[next + 1]) | Int(inbox[next + 2]) << 8 | Int(inbox[next + 3]) << 16 | Int(inbox[next + 4]) << 24
        guard length <= Self.maxLength, fill(5 + length) else { return nil }
        let bytes = Array(inbox[(next + 5)..<(next + 5 + length)])
        next += 5 + length
        return (kind, bytes)
    }

    /// Whether `count` unread bytes are in ``inbox``, reading more from the socket as needed.
    private func fill(_ count: Int) -> Bool {
        if next > 0, inbox.count - next < count {
            inbox.removeSubrange(..<next)
            next = 0
        }
        while inbox.count - next < count {
            let wanted = max(count - (inbox.count - next), 64 << 10)
            let start = inbox.count
            inbox += repeatElement(0, count: wanted)
            let got = inbox.withUnsafeMutableBytes { buffer in
                var got: Int
                repeat { got = Glibc.read(input, buffer.baseAddress! + start, wanted) } while got < 0 && errno == EINTR
                return got
            }
            inbox.removeSubrange((start + max(got, 0))...)
            guard got > 0 else { return false }
        }
        return true
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
}
