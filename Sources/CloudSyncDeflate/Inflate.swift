extension Deflate {
    /// The bytes a raw DEFLATE stream holds.
    ///
    /// A stream that is damaged, ends early, or would give more than
    /// `maxOutputBytes` throws ``DeflateError``; input after the final block is ignored, as zlib ignores it.
    public static func decompress(_ input: [UInt8], maxOutputBytes: Int) throws(DeflateError) -> [UInt8] {
        try input.withUnsafeBufferPointer { buffer throws(DeflateError) in
            var inflater = Inflater(input: buffer, limit: maxOutputBytes)
            try inflater.run()
            return inflater.output
        }
    }
}

/// Reads bits lowest first, as DEFLATE packs them; past the end of the input it reads zeros and counts them, so a
/// stream that ends early is found by ``overran``.
struct BitReader {
    let input: UnsafeBufferPointer<UInt8>
    private(set) var position = 0
    var buffer: UInt64 = 0
    var count = 0

    init(input: UnsafeBufferPointer<UInt8>) { self.input = input }

    /// Whether more bits were taken than the input holds.
    var overran: Bool { position * 8 - count > input.count * 8 }
    /// The input byte the next bit comes from.
    var offset: Int { min(input.count, position - count / 8) }

    /// Fills the buffer to at least 57 bits.
    @inline(__always)
    mutating func refill() {
        while count <= 56 {
            let byte = position < input.count ? input[position] : 0
            buffer |= UInt64(byte) << count
            count += 8
            position += 1
        }
    }

    @inline(__always)
    mutating func bits(_ width: Int) -> Int {
        if count < width { refill() }
        let value = Int(buffer & ((1 << UInt64(width)) - 1))
        buffer >>= UInt64(width)
        count -= width
        return value
    }

    /// Drops the bits left of the current byte, for a stored block.
    mutating func alignToByte() {
        let drop = count & 7
        buffer >>= UInt64(drop)
        count -= drop
    }

    /// After ``alignToByte()``: gives back the whole bytes still in the buffer, so the input can be read directly
    /// from ``position``.
    mutating func returnBufferedBytes() {
        position -= count / 8
        buffer = 0
        count = 0
    }

    mutating func skip(_ bytes: Int) { position += bytes }
}

/// A prefix code read from a block's header: a table for codes of up to ``fastBits`` bits, and the canonical order
/// of every symbol for the longer ones.
struct PrefixDecoder {
    static let fastBits = 9
    /// Indexed by the next ``fastBits`` input bits: `symbol << 4 | length`, or 0 when the code is longer.
    private var fast: [UInt16]
    /// How many codes each length has.
    private var counts: [Int]
    /// Symbols in canonical order: by length, then by value.
    private var sorted: [UInt16]

    /// The decoder of a code with these lengths, or `nil` when they over-fill it (no prefix code has them).
    ///
    /// An incomplete code is accepted, and reading a code it leaves unused throws.
    init?(lengths: ArraySlice<UInt8>) {
        counts = [Int](repeating: 0, count: 16)
        for length in lengths { counts[Int(length)] += 1 }
        counts[0] = 0
        var left = 1
        for length in 1...15 {
            left = left << 1 - counts[length]
            if left < 0 { return nil }
        }
        var offsets = [Int](repeating: 0, count: 16)
        for length in 1..<15 { offsets[length + 1] = offsets[length] + counts[length] }
        sorted = [UInt16](repeating: 0, count: lengths.count)
        fast = [UInt16](repeating: 0, count: 1 << Self.fastBits)
        // The codes the compressor gives these lengths (an incomplete code only leaves the last ones unused).
        let codes = HuffmanCode.reversedCodes(Array(lengths))
        for (symbol, length) in lengths.enumerated() where length > 0 {
            let length = Int(length)
            sorted[offsets[length]] = UInt16(symbol)
            offsets[length] += 1
            guard length <= Self.fastBits else { continue }
            var slot = Int(codes[symbol])
            while slot < 1 << Self.fastBits {
                fast[slot] = UInt16(symbol << 4 | length)
                slot += 1 << length
            }
        }
    }

    /// The next symbol.
    @inline(__always)
    func decode(_ reader: inout BitReader) throws(DeflateError) -> Int {
        if reader.count < 15 { reader.refill() }
        let entry = Int(fast[Int(reader.buffer & ((1 << UInt64(Self.fastBits)) - 1))])
        if entry != 0 {
            reader.buffer >>= UInt64(entry & 15)
            reader.count -= entry & 15
            return entry >> 4
        }
        // Longer than the table: walk the canonical code one bit at a time.
        var code = 0
        var first = 0
        var index = 0
        for length in 1...15 {
            code |= Int((reader.buffer >> UInt64(length - 1)) & 1)
            let count = counts[length]
            if code - first < count {
                reader.buffer >>= UInt64(length)
                reader.count -= length
                return Int(sorted[index + code - first])
            }
            index += count
            first = (first + count) << 1
            code <<= 1
        }
        throw DeflateError(message: "a code the block's table does not have", offset: reader.offset)
    }
}

/// One decompression.
struct Inflater {
    var reader: BitReader
    let limit: Int
    var output: [UInt8] = []

    private static let fixedLiterals = PrefixDecoder(lengths: DeflateTables.fixedLiteralLengths[...])!
    private static let fixedDistances = PrefixDecoder(lengths: DeflateTables.fixedDistanceLengths[...])!

    init(input: UnsafeBufferPointer<UInt8>, limit: Int) {
        reader = BitReader(input: input)
        self.limit = limit
        output.reserveCapacity(min(limit, max(1024, input.count * 3)))
    }

    private func failure(_ message: String) -> DeflateError {
        DeflateError(message: message, offset: reader.offset)
    }

    mutating func run() throws(DeflateError) {
        var final = false
        while !final {
            final = reader.bits(1) == 1
            switch reader.bits(2) {
            case 0: try copyStored()
            case 1: try inflate(Self.fixedLiterals, Self.fixedDistances)
            case 2:
                let (literals, distances) = try readCodes()
                try inflate(literals, distances)
            default: throw failure("a block of the reserved type 3")
            }
            if reader.overran { throw failure("the stream ends before its last block does") }
        }
    }

    private mutating func copyStored() throws(DeflateError) {
        reader.alignToByte()
        let length = reader.bits(16)
        let complement = reader.bits(16)
        guard length == ~complement & 0xFFFF else {
            throw failure("a stored block whose length and its complement disagree")
        }
        reader.returnBufferedBytes()
        guard reader.position + length <= reader.input.count else {
            throw failure("the stream ends inside a stored block")
        }
        guard output.count + length <= limit else { throw failure("more than \(limit) bytes of output") }
        output.append(
            contentsOf: UnsafeBufferPointer(rebasing: reader.input[reader.position..<reader.position + length]))
        reader.skip(length)
    }

    /// A dynamic block's two codes, from its header.
    private mutating func readCodes() throws(DeflateError) -> (PrefixDecoder, PrefixDecoder) {
        let literalCount = reader.bits(5) + 257
        let distanceCount = reader.bits(5) + 1
        let codeLengthCount = reader.bits(4) + 4
        guard literalCount <= 286, distanceCount <= 30 else {
            throw failure("a block header with more length or distance codes than DEFLATE has")
        }
        var codeLengthLengths = [UInt8](repeating: 0, count: 19)
        for symbol in DeflateTables.codeLengthOrder[0..<codeLengthCount] {
            codeLengthLengths[symbol] = UInt8(reader.bits(3))
        }
        guard let codeLengths = PrefixDecoder(lengths: codeLengthLengths[...]) else {
            throw failure("a block header whose code-length code is over-full")
        }
        var lengths = [UInt8](repeating: 0, count: literalCount + distanceCount)
        var index = 0
        while index < lengths.count {
            let symbol = try codeLengths.decode(&reader)
            var value: UInt8 = 0
            var run: Int
            switch symbol {
            case 0...15:
                lengths[index] = UInt8(symbol)
                index += 1
                continue
            case 16:
                guard index > 0 else { throw failure("a block header that repeats a length before the first") }
                value = lengths[index - 1]
                run = 3 + reader.bits(2)
            case 17: run = 3 + reader.bits(3)
            default: run = 11 + reader.bits(7)
            }
            guard index + run <= lengths.count else {
                throw failure("a block header whose lengths run past the codes it declares")
            }
            for _ in 0..<run {
                lengths[index] = value
                index += 1
            }
        }
        guard lengths[256] != 0 else { throw failure("a block without an end-of-block code") }
        guard let literals = PrefixDecoder(lengths: lengths[0..<literalCount]),
            let distances = PrefixDecoder(lengths: lengths[literalCount...])
        else { throw failure("a block header whose codes are over-full") }
        return (literals, distances)
    }

    private mutating func inflate(_ literals: PrefixDecoder, _ distances: PrefixDecoder) throws(DeflateError) {
        while true {
            let symbol = try literals.decode(&reader)
            if symbol < 256 {
                guard output.count < limit else { throw failure("more than \(limit) bytes of output") }
                // Past the input's end every code reads as zeros: stop there, not at the output limit.
                if reader.overran { throw failure("the stream ends inside a block") }
                output.append(UInt8(symbol))
                continue
            }
            if symbol == 256 { return }
            let lengthCode = symbol - 257
            guard lengthCode < 29 else { throw failure("the unused length code \(symbol)") }
            let length = DeflateTables.lengthBase[lengthCode] + reader.bits(DeflateTables.lengthExtraBits[lengthCode])
            let distanceCode = try distances.decode(&reader)
            guard distanceCode < 30 else { throw failure("the unused distance code \(distanceCode)") }
            let distance =
                DeflateTables.distanceBase[distanceCode] + reader.bits(DeflateTables.distanceExtraBits[distanceCode])
            guard distance <= output.count else { throw failure("a match reaching back before the output's start") }
            guard output.count + length <= limit else { throw failure("more than \(limit) bytes of output") }
            if reader.overran { throw failure("the stream ends inside a block") }
            let start = output.count - distance
            for offset in 0..<length { output.append(output[start + offset]) }
        }
    }
}
