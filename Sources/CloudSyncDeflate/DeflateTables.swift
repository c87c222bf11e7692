/// The fixed tables of RFC 1951: what each length and distance code stands for, and the order code-length code
/// lengths are sent in.
enum DeflateTables {
    /// The shortest match length of length codes 257...285, in code order.
    static let lengthBase: [Int] = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    /// Extra bits after each length code.
    static let lengthExtraBits: [Int] = [
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
    ]
    /// The shortest distance of distance codes 0...29.
    static let distanceBase: [Int] = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    /// Extra bits after each distance code.
    static let distanceExtraBits: [Int] = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]
    /// The order a dynamic block's header sends the code-length code's lengths in.
    static let codeLengthOrder: [Int] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    /// Literal/length code lengths of a fixed-code block (RFC 1951 §3.2.6).
    static let fixedLiteralLengths: [UInt8] =
        [UInt8](repeating: 8, count: 144) + [UInt8](repeating: 9, count: 112) + [UInt8](repeating: 7, count: 24)
        + [UInt8](repeating: 8, count: 8)
    /// Distance code lengths of a fixed-code block: 30 codes of 5 bits (two more are reserved).
    static let fixedDistanceLengths = [UInt8](repeating: 5, count: 32)

    /// The length code (0 for code 257) of each match length 0...258; entries below 3 are unused.
    static let lengthCodeOfLength: [UInt8] = (0...258).map { length in
        UInt8(max(0, (lengthBase.lastIndex { $0 <= length }) ?? 0))
    }

    /// The distance code of `distance - 1`, through ``distanceCodeTable``: the value itself below 256, and its
    /// multiple of 128 above, where every code's range starts on one.
    @inline(__always)
    static func distanceCode(_ distance: Int) -> Int {
        let offset = distance - 1
        return Int(distanceCodeTable[offset < 256 ? offset : 256 + (offset >> 7)])
    }

    private static let distanceCodeTable: [UInt8] = (0..<512).map { slot in
        let offset = slot < 256 ? slot : (slot - 256) << 7
        return UInt8(distanceBase.lastIndex { $0 - 1 <= offset } ?? 0)
    }
}
