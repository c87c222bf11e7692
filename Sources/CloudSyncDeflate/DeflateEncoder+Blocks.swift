/// Writing a block: costing each form it can take, and sending the cheapest.
extension DeflateEncoder {
    /// A prefix code for one block: its lengths and their bit-reversed canonical codes.
    struct Code {
        let lengths: [UInt8]
        let codes: [UInt16]

        init(lengths: [UInt8]) {
            self.lengths = lengths
            codes = HuffmanCode.reversedCodes(lengths)
        }

        static let fixedLiterals = Code(lengths: DeflateTables.fixedLiteralLengths)
        static let fixedDistances = Code(lengths: DeflateTables.fixedDistanceLengths)
    }

    /// A dynamic block's codes and the header that sends them, with its size in bits.
    struct DynamicHeader {
        let literals: Code
        let distances: Code
        let codeLengths: Code
        /// The run-length coded code lengths: a code-length symbol and, for 16, 17 and 18, its repeat count.
        let lengthSymbols: [(symbol: UInt8, repeat: UInt8)]
        let literalCount: Int
        let distanceCount: Int
        let codeLengthCount: Int
        let bits: Int

        /// The codes for these frequencies.
        ///
        /// A code needs two symbols to be complete, so when fewer occur, unused
        /// symbols are given a place: decoders (zlib's among them) differ on what else they accept.
        init(literalFrequencies: [UInt32], distanceFrequencies: [UInt32]) {
            literals = Code(lengths: HuffmanCode.lengths(Self.atLeastTwo(literalFrequencies), limit: 15))
            distances = Code(lengths: HuffmanCode.lengths(Self.atLeastTwo(distanceFrequencies), limit: 15))
            literalCount = max(257, (literals.lengths.lastIndex { $0 != 0 } ?? 0) + 1)
            distanceCount = max(1, (distances.lengths.lastIndex { $0 != 0 } ?? 0) + 1)
            let symbols = Self.runLengths(
                Array(literals.lengths[0..<literalCount]) + Array(distances.lengths[0..<distanceCount]))
            lengthSymbols = symbols
            var frequencies = [UInt32](repeating: 0, count: 19)
            for entry in symbols { frequencies[Int(entry.symbol)] += 1 }
            let codeLengths = Code(lengths: HuffmanCode.lengths(Self.atLeastTwo(frequencies), limit: 7))
            self.codeLengths = codeLengths
            codeLengthCount = max(
                4, (DeflateTables.codeLengthOrder.lastIndex { codeLengths.lengths[$0] != 0 } ?? 0) + 1)
            var bits = 5 + 5 + 4 + 3 * codeLengthCount
            for entry in symbols {
                bits += Int(codeLengths.lengths[Int(entry.symbol)])
                bits += entry.symbol == 16 ? 2 : entry.symbol == 17 ? 3 : entry.symbol == 18 ? 7 : 0
            }
            self.bits = bits
        }

        private static func atLeastTwo(_ frequencies: [UInt32]) -> [UInt32] {
            var frequencies = frequencies
            var missing = 2 - frequencies.lazy.filter { $0 > 0 }.count
            var index = 0
            while missing > 0 {
                if frequencies[index] == 0 {
                    frequencies[index] = 1
                    missing -= 1
                }
                index += 1
            }
            return frequencies
        }

        /// `lengths` with runs sent as 16 (repeat the previous length 3–6 times), 17 (3–10 zeros) and 18 (11–138
        /// zeros).
        private static func runLengths(_ lengths: [UInt8]) -> [(symbol: UInt8, repeat: UInt8)] {
            var symbols: [(symbol: UInt8, repeat: UInt8)] = []
            var index = 0
            while index < lengths.count {
                let length = lengths[index]
                var run = 1
                while index + run < lengths.count && lengths[index + run] == length { run += 1 }
                index += run
                if length == 0 {
                    while run >= 11 {
                        let taken = min(run, 138)
                        symbols.append((18, UInt8(taken - 11)))
                        run -= taken
                    }
                    if run >= 3 {
                        symbols.append((17, UInt8(run - 3)))
                        run = 0
                    }
                } else {
                    symbols.append((length, 0))
                    run -= 1
                    while run >= 3 {
                        let taken = min(run, 6)
                        symbols.append((16, UInt8(taken - 3)))
                        run -= taken
                    }
                }
                for _ in 0..<run { symbols.append((length, 0)) }
            }
            return symbols
        }
    }

    /// Bits that symbols seen these many times take under these code lengths, extra bits included.
    private static func symbolBits(
        _ literalFrequencies: [UInt32], _ literalLengths: [UInt8], _ distanceFrequencies: [UInt32] = [],
        _ distanceLengths: [UInt8] = []
    ) -> Int {
        var bits = 0
        for (symbol, count) in literalFrequencies.enumerated() where count > 0 {
            let extra = symbol > 256 ? DeflateTables.lengthExtraBits[symbol - 257] : 0
            bits += Int(count) * (Int(literalLengths[symbol]) + extra)
        }
        for (symbol, count) in distanceFrequencies.enumerated() where count > 0 {
            bits += Int(count) * (Int(distanceLengths[symbol]) + DeflateTables.distanceExtraBits[symbol])
        }
        return bits
    }

    /// A block's first three bits: whether it is the stream's last, and its type (0 stored, 1 fixed, 2 dynamic).
    private mutating func writeBlockStart(final: Bool, type: UInt32) {
        writer.write(final ? 1 : 0, width: 1)
        writer.write(type, width: 2)
    }

    /// Writes the block of input `block.start..<end` in its smallest form and starts the next one.
    mutating func writeBlock(end: Int, final: Bool) {
        block.literalFrequencies[256] += 1
        let matched = DynamicHeader(
            literalFrequencies: block.literalFrequencies, distanceFrequencies: block.distanceFrequencies)
        let matchedBits =
            matched.bits
            + Self.symbolBits(
                block.literalFrequencies, matched.literals.lengths, block.distanceFrequencies,
                matched.distances.lengths)
        let fixedBits = Self.symbolBits(
            block.literalFrequencies, DeflateTables.fixedLiteralLengths, block.distanceFrequencies,
            DeflateTables.fixedDistanceLengths)

        var byteFrequencies = [UInt32](repeating: 0, count: 286)
        for byte in UnsafeBufferPointer(rebasing: input[block.start..<end]) { byteFrequencies[Int(byte)] += 1 }
        byteFrequencies[256] = 1
        let literal = DynamicHeader(
            literalFrequencies: byteFrequencies, distanceFrequencies: [UInt32](repeating: 0, count: 30))
        let literalBits = literal.bits + Self.symbolBits(byteFrequencies, literal.literals.lengths)
        let length = end - block.start
        let storedBits = max(1, (length + 65_534) / 65_535) * 40 + 8 * length + 7

        let smallest = min(matchedBits, fixedBits, literalBits, storedBits)
        unsearchedBlocks = max(0, unsearchedBlocks - 1)
        if smallest < min(matchedBits, fixedBits) {
            unsearchedBlocks = Self.blocksWithoutSearch
        }
        if smallest == storedBits {
            writeStored(end: end, final: final)
        } else if smallest == literalBits {
            writeBlockStart(final: final, type: 2)
            writeHeader(literal)
            let literals = literal.literals
            for byte in UnsafeBufferPointer(rebasing: input[block.start..<end]) {
                writer.write(UInt32(literals.codes[Int(byte)]), width: Int(literals.lengths[Int(byte)]))
            }
            writer.write(UInt32(literals.codes[256]), width: Int(literals.lengths[256]))
        } else if smallest == fixedBits {
            writeBlockStart(final: final, type: 1)
            writeSymbols(Code.fixedLiterals, Code.fixedDistances)
        } else {
            writeBlockStart(final: final, type: 2)
            writeHeader(matched)
            writeSymbols(matched.literals, matched.distances)
        }
        block.reset(start: end)
    }

    private mutating func writeHeader(_ header: DynamicHeader) {
        writer.write(UInt32(header.literalCount - 257), width: 5)
        writer.write(UInt32(header.distanceCount - 1), width: 5)
        writer.write(UInt32(header.codeLengthCount - 4), width: 4)
        for symbol in DeflateTables.codeLengthOrder[0..<header.codeLengthCount] {
            writer.write(UInt32(header.codeLengths.lengths[symbol]), width: 3)
        }
        for entry in header.lengthSymbols {
            let symbol = Int(entry.symbol)
            writer.write(UInt32(header.codeLengths.codes[symbol]), width: Int(header.codeLengths.lengths[symbol]))
            switch symbol {
            case 16: writer.write(UInt32(entry.repeat), width: 2)
            case 17: writer.write(UInt32(entry.repeat), width: 3)
            case 18: writer.write(UInt32(entry.repeat), width: 7)
            default: break
            }
        }
    }

    private mutating func writeSymbols(_ literals: Code, _ distances: Code) {
        for symbol in block.symbols {
            if symbol < 256 {
                writer.write(UInt32(literals.codes[Int(symbol)]), width: Int(literals.lengths[Int(symbol)]))
                continue
            }
            let length = Int(symbol >> 16)
            let distance = Int(symbol & 0xFFFF) + 1
            let lengthCode = Int(DeflateTables.lengthCodeOfLength[length])
            writer.write(UInt32(literals.codes[257 + lengthCode]), width: Int(literals.lengths[257 + lengthCode]))
            let lengthExtra = DeflateTables.lengthExtraBits[lengthCode]
            if lengthExtra > 0 {
                writer.write(UInt32(length - DeflateTables.lengthBase[lengthCode]), width: lengthExtra)
            }
            let distanceCode = DeflateTables.distanceCode(distance)
            writer.write(UInt32(distances.codes[distanceCode]), width: Int(distances.lengths[distanceCode]))
            let distanceExtra = DeflateTables.distanceExtraBits[distanceCode]
            if distanceExtra > 0 {
                writer.write(UInt32(distance - DeflateTables.distanceBase[distanceCode]), width: distanceExtra)
            }
        }
        writer.write(UInt32(literals.codes[256]), width: Int(literals.lengths[256]))
    }

    /// The block's bytes as stored blocks of at most 65,535 bytes each.
    private mutating func writeStored(end: Int, final: Bool) {
        var start = block.start
        repeat {
            let length = min(65_535, end - start)
            let last = start + length == end
            writeBlockStart(final: final && last, type: 0)
            writer.alignToByte()
            writer.write(UInt32(length), width: 16)
            writer.write(UInt32(~length & 0xFFFF), width: 16)
            writer.append(UnsafeBufferPointer(rebasing: input[start..<start + length]))
            start += length
        } while start < end
    }
}
