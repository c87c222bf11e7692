/// Bits packed as DEFLATE packs them: each value's lowest bit first, bytes filled from their lowest bit.
struct BitWriter {
    private(set) var bytes: [UInt8] = []
    private var buffer: UInt64 = 0
    private var count = 0

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Appends the low `width` bits of `bits` (at most 32; the higher bits must be zero).
    @inline(__always)
    mutating func write(_ bits: UInt32, width: Int) {
        buffer |= UInt64(bits) << count
        count += width
        if count >= 32 {
            bytes.append(UInt8(truncatingIfNeeded: buffer))
            bytes.append(UInt8(truncatingIfNeeded: buffer >> 8))
            bytes.append(UInt8(truncatingIfNeeded: buffer >> 16))
            bytes.append(UInt8(truncatingIfNeeded: buffer >> 24))
            buffer >>= 32
            count -= 32
        }
    }

    /// Pads with zero bits to the next byte boundary and writes out every whole byte, as a stored block needs.
    mutating func alignToByte() {
        while count > 0 {
            bytes.append(UInt8(truncatingIfNeeded: buffer))
            buffer >>= 8
            count = max(0, count - 8)
        }
        buffer = 0
    }

    /// Appends bytes as they are; only after ``alignToByte()``.
    mutating func append(_ raw: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: raw) }

    /// The bytes written, the last one padded with zero bits.
    mutating func finish() -> [UInt8] {
        alignToByte()
        return bytes
    }
}
