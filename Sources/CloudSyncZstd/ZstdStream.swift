import CZstd

/// Decompressing through zstd's streaming interface, which stops at a bound whatever the frames claim.
enum ZstdStream {
    /// Every frame of `bytes` decompressed, growing the output as it fills up to `maxOutputBytes`; `expected` (the
    /// first frame's declared size, when known) sizes the first allocation.
    static func decompress(_ bytes: UnsafeRawBufferPointer, maxOutputBytes: Int, expected: UInt64) throws(ZstdError)
        -> [UInt8]
    {
        guard let context = ZSTD_createDCtx() else { fatalError("zstd could not allocate a decompression context") }
        defer { ZSTD_freeDCtx(context) }
        let known = expected != Zstd.contentSizeUnknown ? Int(expected) : bytes.count * 4
        // What may be written so far; the buffer keeps at least a byte, so it always has an address.
        var capacity = min(known, maxOutputBytes)
        var output = [UInt8](repeating: 0, count: max(1, capacity))
        var input = ZSTD_inBuffer(src: bytes.baseAddress, size: bytes.count, pos: 0)
        var produced = 0
        var remaining = 1
        while input.pos < input.size || remaining != 0 {
            if produced == capacity, capacity < maxOutputBytes {
                capacity = min(max(1, capacity * 2), maxOutputBytes)
                output.append(contentsOf: repeatElement(0, count: max(0, capacity - output.count)))
            }
            let before = (input.pos, produced)
            // With no room left it still reads what needs none: a frame's end, its checksum, the next frame's header.
            remaining = output.withUnsafeMutableBytes { buffer in
                var out = ZSTD_outBuffer(dst: buffer.baseAddress! + produced, size: capacity - produced, pos: 0)
                let result = ZSTD_decompressStream(context, &out, &input)
                produced += out.pos
                return result
            }
            if ZSTD_isError(remaining) != 0 { throw .damaged(Zstd.errorName(remaining)) }
            if (input.pos, produced) == before {
                // Nothing moved: it wants room past the bound, or input that is not there.
                if produced == capacity { throw .tooLarge(limit: maxOutputBytes) }
                throw .damaged("the data ends inside a frame")
            }
        }
        output.removeSubrange(produced...)
        return output
    }
}
