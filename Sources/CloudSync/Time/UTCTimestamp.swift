/// Reads the UTC timestamps storage services put in their listings (`2026-12-06T23:12:50.123Z`, S3's
/// `LastModified`, Drive's `modifiedTime`) as milliseconds since the epoch, without a formatter.
///
/// A listing carries one per key, so this parses the fixed shape by hand: `ISO8601DateFormatter` cost more per key
/// than the rest of a page. Fractions beyond milliseconds are dropped; anything else (an offset other than `Z`, a
/// field out of range) is nil.
package enum UTCTimestamp {
    /// Milliseconds since the epoch of `text`, or nil when it is not `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
    package static func milliseconds(_ text: Substring) -> Int64? {
        let bytes = text.utf8
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        var position = bytes.startIndex
        func number(_ digits: Int, then separator: UInt8?) -> Int64? {
            var value: Int64 = 0
            for _ in 0..<digits {
                guard position != bytes.endIndex else { return nil }
                let byte = bytes[position]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                position = bytes.index(after: position)
            }
            if let separator {
                guard position != bytes.endIndex, bytes[position] == separator else { return nil }
                position = bytes.index(after: position)
            }
            return value
        }
        guard let year = number(4, then: UInt8(ascii: "-")), let month = number(2, then: UInt8(ascii: "-")),
            let day = number(2, then: UInt8(ascii: "T")), let hour = number(2, then: UInt8(ascii: ":")),
            let minute = number(2, then: UInt8(ascii: ":")), let second = number(2, then: nil),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var millisecond: Int64 = 0
        if bytes[position] == UInt8(ascii: ".") {
            position = bytes.index(after: position)
            var scale: Int64 = 100
            var digits = 0
            while position != bytes.endIndex, bytes[position] != UInt8(ascii: "Z") {
                let byte = bytes[position]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                millisecond += Int64(byte - UInt8(ascii: "0")) * scale
                scale /= 10
                digits += 1
                position = bytes.index(after: position)
            }
            guard digits > 0 else { return nil }
        }
        guard bytes.index(after: position) == bytes.endIndex else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millisecond
    }

    /// Days from 1970-01-01 to the proleptic Gregorian date given (Howard Hinnant's days-from-civil).
    package static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
