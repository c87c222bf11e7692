/// Raw DEFLATE (RFC 1951): ``compress(_:)`` and ``decompress(_:maxOutputBytes:)``.
///
/// Written here because none of the C libraries the package may link compresses, and backups need it: restic and
/// every peer store compressed data. The output is a plain RFC 1951 stream, so zlib (`zlib.decompress(data, -15)` in
/// Python) reads it, and the tests check both directions against zlib.
///
/// The compressor finds matches of at least 4 bytes through a hash of the next 4 bytes and a short chain of earlier
/// places with the same hash (greedy, no lazy matching: about zlib's level 3), then writes each block of up to
/// 16,384 symbols in whichever form is smallest: a code built for the block, the fixed code, its bytes as literals
/// under a code of their own (what pays for text from a small alphabet, such as hexadecimal, where short matches cost
/// more than they save), or stored.
public enum Deflate {
    /// `input` as a raw DEFLATE stream.
    public static func compress(_ input: [UInt8]) -> [UInt8] {
        compress(input, segmentBytes: DeflateEncoder.segmentBytes)
    }

    /// ``compress(_:)`` with the input taken `segmentBytes` at a time (tests make them small).
    static func compress(_ input: [UInt8], segmentBytes: Int) -> [UInt8] {
        input.withUnsafeBufferPointer { buffer in
            var writer = BitWriter(capacity: buffer.count / 2 + 64)
            var start = 0
            repeat {
                let end = min(buffer.count, start + segmentBytes)
                // Handed over, not shared: the encoder writes to the only copy of the bytes.
                var encoder = DeflateEncoder(
                    input: UnsafeBufferPointer(rebasing: buffer[start..<end]), writer: consume writer)
                encoder.run(final: end == buffer.count)
                writer = encoder.writer
                start = end
            } while start < buffer.count
            return writer.finish()
        }
    }
}

/// One compression: the match finder's tables and the symbols of the block under way.
struct DeflateEncoder {
    static let windowSize = 32_768
    static let hashBits = 15
    /// Matches shorter than this are not looked for (the hash covers 4 bytes).
    static let minimumMatch = 4
    static let maximumMatch = 258
    /// How many earlier places with the same hash are tried for each position.
    static let chainLimit = 8
    /// A match this long ends the search.
    static let goodEnough = 64
    /// Symbols per block: enough for a code to pay for its header, few enough to follow changes in the data.
    static let symbolsPerBlock = 16_384
    /// Input is compressed this much at a time, each piece with match tables of its own, so that positions fit the
    /// tables' 32-bit entries however large the input (no match reaches across pieces, which costs nothing a window
    /// of 32 KiB would notice).
    static let segmentBytes = 1 << 30

    /// Blocks that look for matches at only one position in 16, after a block whose matches did not pay.
    ///
    /// That is, its literals under their own code, or stored, were smaller: for hexadecimal or already compressed data
    /// the search is most of the time spent, and finds nothing worth sending.
    static let blocksWithoutSearch = 3
    /// A match this long found while not searching resumes the search.
    static let resumingMatch = 8

    let input: UnsafeBufferPointer<UInt8>
    var writer: BitWriter
    /// The most recent position of each hash, or -1.
    let head: UnsafeMutablePointer<Int32>
    /// For each position in the window, the previous position with its hash.
    let previous: UnsafeMutablePointer<Int32>
    var block: BlockSymbols
    /// Blocks still to look for matches at only one position in 16.
    var unsearchedBlocks = 0

    init(input: UnsafeBufferPointer<UInt8>, writer: BitWriter) {
        self.input = input
        self.writer = writer
        head = .allocate(capacity: 1 << Self.hashBits)
        head.initialize(repeating: -1, count: 1 << Self.hashBits)
        previous = .allocate(capacity: Self.windowSize)
        previous.initialize(repeating: -1, count: Self.windowSize)
        block = BlockSymbols(capacity: Self.symbolsPerBlock)
    }

    /// Writes the blocks of this piece of input, the last one marked final when `final`.
    mutating func run(final: Bool) {
        defer {
            head.deallocate()
            previous.deallocate()
        }
        let count = input.count
        var position = 0
        while position < count {
            // Between searched blocks, every 16th position still looks, and a long match resumes the search: data
            // that turns from noise to text is not left unsearched.
            let searching = unsearchedBlocks == 0 || position & 15 == 0
            let (length, distance) = searching ? longestMatch(at: position) : (0, 0)
            if length >= (unsearchedBlocks == 0 ? Self.minimumMatch : Self.resumingMatch) {
                unsearchedBlocks = 0
                block.addMatch(length: length, distance: distance)
                // Every position the match covers can start a later match.
                let last = min(position + length, count - Self.minimumMatch + 1)
                var next = position + 1
                while next < last {
                    link(next, into: hash(word(at: next)))
                    next += 1
                }
                position += length
            } else {
                block.addLiteral(input[position])
                position += 1
            }
            if block.symbols.count >= Self.symbolsPerBlock {
                writeBlock(end: position, final: final && position == count)
            }
        }
        if block.symbols.count > 0 || (count == 0 && final) { writeBlock(end: count, final: final) }
    }

    @inline(__always)
    private func word(at position: Int) -> UInt32 {
        UnsafeRawPointer(input.baseAddress! + position).loadUnaligned(as: UInt32.self)
    }

    @inline(__always)
    private func hash(_ word: UInt32) -> Int { Int((word &* 2_654_435_761) >> (32 - UInt32(Self.hashBits))) }

    /// Makes `position` the newest place of hash `slot`'s chain; returns the place it displaced, or -1.
    @inline(__always)
    @discardableResult
    private mutating func link(_ position: Int, into slot: Int) -> Int {
        let older = head[slot]
        previous[position & (Self.windowSize - 1)] = older
        head[slot] = Int32(position)
        return Int(older)
    }

    /// The longest earlier match for the bytes at `position` (inserting `position` into the chains), or length 0.
    private mutating func longestMatch(at position: Int) -> (length: Int, distance: Int) {
        guard position + Self.minimumMatch <= input.count else { return (0, 0) }
        let here = word(at: position)
        var candidate = link(position, into: hash(here))
        let limit = min(Self.maximumMatch, input.count - position)
        var bestLength = 0
        var bestDistance = 0
        var tries = Self.chainLimit
        let bytes = input.baseAddress!
        while candidate >= 0 && position - candidate < Self.windowSize && tries > 0 {
            // A candidate can only be longer if it agrees at the best length so far.
            if bytes[candidate + bestLength] == bytes[position + bestLength] && word(at: candidate) == here {
                var length = Self.minimumMatch
                while length < limit && bytes[candidate + length] == bytes[position + length] { length += 1 }
                if length > bestLength {
                    bestLength = length
                    bestDistance = position - candidate
                    if length >= min(limit, Self.goodEnough) { break }
                }
            }
            let older = Int(previous[candidate & (Self.windowSize - 1)])
            // A slot overwritten by a newer position ends the chain.
            guard older < candidate else { break }
            candidate = older
            tries -= 1
        }
        return (bestLength, bestDistance)
    }
}

/// The symbols of one block, and how often each code occurs.
struct BlockSymbols {
    /// Input offset of the block's first byte.
    var start = 0
    /// A literal byte, or a match as `length << 16 | (distance - 1)`.
    var symbols: [UInt32] = []
    var literalFrequencies = [UInt32](repeating: 0, count: 286)
    var distanceFrequencies = [UInt32](repeating: 0, count: 30)

    init(capacity: Int) { symbols.reserveCapacity(capacity) }

    @inline(__always)
    mutating func addLiteral(_ byte: UInt8) {
        symbols.append(UInt32(byte))
        literalFrequencies[Int(byte)] += 1
    }

    @inline(__always)
    mutating func addMatch(length: Int, distance: Int) {
        symbols.append(UInt32(length) << 16 | UInt32(distance - 1))
        literalFrequencies[257 + Int(DeflateTables.lengthCodeOfLength[length])] += 1
        distanceFrequencies[DeflateTables.distanceCode(distance)] += 1
    }

    mutating func reset(start: Int) {
        self.start = start
        symbols.removeAll(keepingCapacity: true)
        for index in literalFrequencies.indices { literalFrequencies[index] = 0 }
        for index in distanceFrequencies.indices { distanceFrequencies[index] = 0 }
    }
}
