/// One parameter or column value, typed; no C type appears in the face.
public enum PostgresValue: Sendable, Equatable, Hashable {
    case null
    case text(String)
    case integer(Int64)
    case double(Double)
    case boolean(Bool)
    case bytes([UInt8])

    /// A one-dimensional array in PostgreSQL's text form (`{"a","b",NULL}`), bound as text and cast in the statement
    /// (`$1::text[]`), so one statement carries a whole page of rows.
    public static func array(_ elements: [String?]) -> PostgresValue {
        var literal = "{"
        literal.reserveCapacity(elements.count * 16 + 2)
        for (index, element) in elements.enumerated() {
            if index > 0 { literal += "," }
            guard let element else {
                literal += "NULL"
                continue
            }
            literal += "\""
            for character in element.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return .text(literal + "}")
    }

    /// The text, when the value is text.
    public var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The integer, when the value is one.
    public var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The bytes, when the value is `bytea`.
    public var bytes: [UInt8]? {
        if case .bytes(let value) = self { return value }
        return nil
    }

    /// The boolean, when the value is one.
    public var boolean: Bool? {
        if case .boolean(let value) = self { return value }
        return nil
    }

    /// The type the server is told the parameter has (`int8`, `text`, `bytea`, `bool`, `float8`), or 0 to infer.
    var typeOID: UInt32 {
        switch self {
        case .null: return 0
        case .text: return 25
        case .integer: return 20
        case .double: return 701
        case .boolean: return 16
        case .bytes: return 17
        }
    }

    /// The parameter in PostgreSQL's text format; nil for NULL.
    var textFormat: String? {
        switch self {
        case .null: return nil
        case .text(let value): return value
        case .integer(let value): return String(value)
        case .double(let value): return "\(value)"
        case .boolean(let value): return value ? "t" : "f"
        case .bytes(let value):
            let digits = Array("0123456789abcdef".utf8)
            var hex: [UInt8] = Array("\\x".utf8)
            hex.reserveCapacity(2 + value.count * 2)
            for byte in value {
                hex.append(digits[Int(byte >> 4)])
                hex.append(digits[Int(byte & 0x0F)])
            }
            return String(decoding: hex, as: UTF8.self)
        }
    }

    /// A column value the server sent in text format, read by its column's type.
    init(text: String, typeOID: UInt32) {
        switch typeOID {
        case 20, 21, 23: self = Int64(text).map { .integer($0) } ?? .text(text)
        case 700, 701: self = Double(text).map { .double($0) } ?? .text(text)
        case 16: self = .boolean(text == "t")
        case 17: self = PostgresValue.bytea(text).map { .bytes($0) } ?? .text(text)
        default: self = .text(text)
        }
    }

    /// `\x`-prefixed hexadecimal, as `bytea` comes in text format.
    private static func bytea(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            return nil
        }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

/// What a statement returned: its columns and rows, and how many rows it changed.
public struct PostgresResult: Sendable, Equatable {
    /// Column names, in order.
    public var columns: [String]
    /// Each row's values, positionally.
    public var rows: [[PostgresValue]]
    /// Rows inserted, updated or deleted (0 for a query).
    public var affectedRows: Int

    /// The value of column `name` in row `row`; nil when there is no such column.
    public func value(_ name: String, row: Int = 0) -> PostgresValue? {
        guard let column = columns.firstIndex(of: name), row < rows.count else { return nil }
        return rows[row][column]
    }
}
