import Foundation

/// JSON strings written straight into bytes, for the formats that stream JSON or hash it rather than building
/// Foundation objects: export files and backup trees.
package enum JSONText {
    /// How a string's special characters are written.
    package enum Style: Sendable {
        /// Quotes, backslashes and control characters escaped, the controls other than `\n`, `\r` and `\t` as
        /// `\u00XX`: the shortest text every JSON reader agrees on (export files).
        case minimal
        /// Exactly as `JSONSerialization` writes it: `/` escaped too, and backspace and form feed as `\b` and `\f`.
        /// For bytes that must stay what Foundation made of them (backup trees, whose ids are their hashes).
        case foundation
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `value` as a JSON string, its plain runs copied whole.
    package static func appendString<Target: RangeReplaceableCollection>(
        _ value: String, to target: inout Target, style: Style = .minimal
    ) where Target.Element == UInt8 {
        let slashes = style == .foundation
        var value = value
        value.withUTF8 { bytes in
            target.append(UInt8(ascii: "\""))
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard
                    byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                        || (slashes && byte == UInt8(ascii: "/"))
                else { continue }
                target.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                switch byte {
                case UInt8(ascii: "\""): target.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): target.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "/"): target.append(contentsOf: #"\/"#.utf8)
                case 0x0A: target.append(contentsOf: #"\n"#.utf8)
                case 0x0D: target.append(contentsOf: #"\r"#.utf8)
                case 0x09: target.append(contentsOf: #"\t"#.utf8)
                case 0x08 where slashes: target.append(contentsOf: #"\b"#.utf8)
                case 0x0C where slashes: target.append(contentsOf: #"\f"#.utf8)
                default:
                    target.append(contentsOf: #"\u00"#.utf8)
                    target.append(hexDigits[Int(byte >> 4)])
                    target.append(hexDigits[Int(byte & 0x0F)])
                }
                start = index + 1
            }
            target.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
            target.append(UInt8(ascii: "\""))
        }
    }
}

extension JSONEncoder {
    /// The project's one JSON style: pretty, sorted keys, slashes unescaped — stable for diffs and pins.
    package static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
