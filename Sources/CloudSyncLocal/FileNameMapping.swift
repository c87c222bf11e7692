/// The reversible mapping between keys and file paths under a directory provider's root.
///
/// - Each UTF-8 byte of the key that is a lower-case ASCII letter, a digit, `_`, `-`, or a `.` that is not the first
///   byte stays as it is; every other byte becomes `%` and two upper-case hex digits. So `/`, NUL, `..`, a leading
///   dot, upper case, spaces and non-ASCII can never form a path of their own, and two keys that differ only in case
///   still map to names that differ on a case-insensitive file system (`A` is `%41`).
/// - An encoded name of at most 240 bytes is the file name itself, directly under the root.
/// - A longer one is cut into pieces of at most 200 bytes: every piece but the last names a directory and is written
///   with a `+` in front, the last names the file and is written with a `=` in front. `+` and `=` never appear in an
///   encoded name (they are escaped), so nothing else can be mistaken for a piece.
/// - Names starting with `.` are never produced: temporary files use them, and listing skips them.
///
/// Decoding accepts only what encoding produces, so foreign files in the root are ignored rather than misread.
enum FileNameMapping {
    static let maxFileNameBytes = 240
    static let pieceBytes = 200

    static func encode(_ key: String) -> String {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(key.utf8.count)
        for (index, byte) in key.utf8.enumerated() {
            if isLiteral(byte, first: index == 0) {
                encoded.append(byte)
            } else {
                encoded += [UInt8(ascii: "%"), hexDigit(byte >> 4), hexDigit(byte & 0x0F)]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// Whether an encoded name is its own key: nothing escaped, and no leading dot (which encoding never leaves bare).
    ///
    /// Most names are; ``decode(_:)`` gives the key of any other.
    static func isOwnKey(_ encoded: some Collection<UInt8>) -> Bool {
        guard let first = encoded.first, first != UInt8(ascii: ".") else { return false }
        return encoded.allSatisfy { isLiteral($0, first: false) }
    }

    /// The key an encoded name stands for, or nil when encoding never produces that name.
    static func decode(_ encoded: String) -> String? {
        if isOwnKey(encoded.utf8) { return encoded }
        let bytes = Array(encoded.utf8)
        var decoded: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return nil }
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        guard let key = String(validating: decoded, as: UTF8.self), !key.isEmpty, encode(key) == encoded else {
            return nil
        }
        return key
    }

    /// Path components under the root for an encoded name.
    static func components(of encoded: String) -> [String] {
        let bytes = Array(encoded.utf8)
        guard bytes.count > maxFileNameBytes else { return [encoded] }
        var pieces: [String] = []
        var start = 0
        while bytes.count - start > pieceBytes {
            pieces.append("+" + String(decoding: bytes[start..<start + pieceBytes], as: UTF8.self))
            start += pieceBytes
        }
        pieces.append("=" + String(decoding: bytes[start...], as: UTF8.self))
        return pieces
    }

    private static func isLiteral(_ byte: UInt8, first: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"),
            UInt8(ascii: "-"):
            return true
        case UInt8(ascii: "."):
            return !first
        default:
            return false
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    /// Only upper-case digits, as encoding writes them.
    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
