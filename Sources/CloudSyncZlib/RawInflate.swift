import CZlib

/// zlib's face: raw DEFLATE (RFC 1951, no zlib or gzip wrapper) inflated up to a bound, for reading what earlier
/// formats wrote.
public enum RawInflate {
    /// zlib's version, such as `1.2.13`.
    public static var version: String { String(cString: zlibVersion()) }

    /// What the raw DEFLATE stream `bytes` holds; refused when it is damaged, does not end, is followed by other
    /// bytes, or holds more than `maxOutputBytes` (found before more than that is allocated).
    public static func inflate(_ bytes: UnsafeRawBufferPointer, maxOutputBytes: Int) throws(InflateError) -> [UInt8] {
        var stream = z_stream()
        guard cloudsync_inflate_init_raw(&stream) == Z_OK else { fatalError("zlib could not start inflating") }
        defer { inflateEnd(&stream) }
        // What may be written so far; the buffer keeps at least a byte, so it always has an address.
        var capacity = min(bytes.count * 4, maxOutputBytes)
        var output = [UInt8](repeating: 0, count: max(1, capacity))
        var produced = 0
        stream.next_in = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = UInt32(bytes.count)
        while true {
            if produced == capacity, capacity < maxOutputBytes {
                capacity = min(max(1, capacity * 2), maxOutputBytes)
                output.append(contentsOf: repeatElement(0, count: max(0, capacity - output.count)))
            }
            // With no room left it may still finish: the last block's end code needs none.
            let room = min(capacity - produced, Int(UInt32.max))
            let status = output.withUnsafeMutableBytes { buffer in
                stream.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self) + produced
                stream.avail_out = UInt32(room)
                let status = CZlib.inflate(&stream, Z_NO_FLUSH)
                produced += room - Int(stream.avail_out)
                return status
            }
            switch status {
            case Z_STREAM_END:
                guard stream.avail_in == 0 else { throw .damaged("bytes follow the end of the stream") }
                output.removeSubrange(produced...)
                return output
            case Z_OK:
                continue
            case Z_BUF_ERROR:
                // Nothing moved: it wants room past the bound, or input that is not there.
                if produced == capacity { throw .tooLarge(limit: maxOutputBytes) }
                throw .damaged("the stream ends before its last block")
            default:
                throw .damaged(stream.msg.map { String(cString: $0) } ?? "zlib error \(status)")
            }
        }
    }

    /// What the raw DEFLATE stream `bytes` holds, at most `maxOutputBytes`.
    public static func inflate(_ bytes: [UInt8], maxOutputBytes: Int) throws(InflateError) -> [UInt8] {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(InflateError) in try inflate(buffer, maxOutputBytes: maxOutputBytes) }
        }.get()
    }
}

/// Why a raw DEFLATE stream was refused.
public enum InflateError: Error, Equatable, CustomStringConvertible {
    /// The stream is damaged or cut short; zlib's words for it.
    case damaged(String)
    /// It holds more than the bound given.
    case tooLarge(limit: Int)

    public var description: String {
        switch self {
        case .damaged(let reason): "damaged DEFLATE data (\(reason))"
        case .tooLarge(let limit): "DEFLATE data that holds more than \(limit) bytes"
        }
    }
}
