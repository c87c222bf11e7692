import Foundation

/// One provider's copy of a value, decoded, as a resolver sees it.
public struct Candidate: Sendable, Equatable {
    /// The provider the copy came from, by id; candidates arrive in preference order.
    public var provider: String
    /// The decoded value.
    public var value: String

    /// A candidate, for custom resolvers' tests.
    public init(provider: String, value: String) {
        self.provider = provider
        self.value = value
    }
}

/// Picks (or builds) the value a read returns from every provider's copy.
///
/// Candidates arrive in preference order. Returning nil means "none of these": the read returns nil and nothing is
/// repaired. A resolver must be deterministic: the same candidates give the same answer, or reads flap.
public struct Resolver: Sendable {
    private let body: @Sendable ([Candidate]) -> String?

    private init(_ resolve: @escaping @Sendable ([Candidate]) -> String?) { body = resolve }

    /// A resolver of your own: any deterministic function of the candidates.
    public static func custom(_ resolve: @escaping @Sendable ([Candidate]) -> String?) -> Resolver {
        Resolver(resolve)
    }

    /// The value a read returns for these candidates, or nil for "none of these".
    public func resolve(_ candidates: [Candidate]) -> String? { body(candidates) }
}

extension Resolver {
    /// Newest wins, for JSON objects that carry a timestamp in `field`.
    ///
    /// The field may hold epoch milliseconds (a number, or a string of digits) or an ISO-8601 date-time with or without
    /// fractional seconds, ending in `Z` or an offset. A candidate that can be dated beats one that cannot; among equals
    /// the earlier provider wins, so results do not flap. When none can be dated, the first candidate wins. Values that
    /// are not JSON objects cannot be dated; they are not errors.
    public static func timestamp(field: String) -> Resolver {
        Resolver { candidates in
            var best: (value: String, time: Double?)?
            for candidate in candidates {
                let time = Timestamp.milliseconds(in: candidate.value, field: field)
                guard let current = best else {
                    best = (candidate.value, time)
                    continue
                }
                switch (current.time, time) {
                case (nil, .some):
                    best = (candidate.value, time)  // a date beats no date
                case (.some(let kept), .some(let offered)) where offered > kept:
                    best = (candidate.value, time)  // strictly newer; on a tie the earlier provider stays
                default:
                    break
                }
            }
            return best?.value
        }
    }
}

extension Resolver {
    /// Merges JSON arrays: every element of every candidate, once, for lists where two devices adding different
    /// elements should both survive (favourite ids, dismissed tips).
    ///
    /// Elements are the same when their `id` field is equal (or, with no `id` given or for elements without that field,
    /// when the elements are equal as JSON). Earlier providers' elements come first, each list in its own order.
    /// Candidates that are not JSON arrays are left out of the merge; when none is an array, the first candidate wins
    /// unchanged. Deletions do not propagate: a plain array has no record of what used to be in it, so an element removed
    /// on one side comes back from the other. Track removals yourself (a separate removed-ids list) when that matters.
    public static func union(id: String? = nil) -> Resolver {
        Resolver { candidates in
            var merged: [Any] = []
            // Identities compare as bytes: elements whose text differs only in Unicode normalisation stay apart.
            var seen = Set<StoreKey>()
            var anyArray = false
            for candidate in candidates {
                guard let elements = JSONValue.parse(candidate.value) as? [Any] else { continue }
                anyArray = true
                for element in elements {
                    let identity: String
                    if let id, let object = element as? [String: Any], let value = object[id] {
                        identity = "id:" + JSONValue.canonical(value)
                    } else {
                        identity = "element:" + JSONValue.canonical(element)
                    }
                    if seen.insert(StoreKey(identity)).inserted { merged.append(element) }
                }
            }
            guard anyArray else { return candidates.first?.value }
            return JSONValue.canonical(merged)
        }
    }
}

/// JSON through Foundation, with a canonical text form (sorted keys) for comparing and writing merged values.
enum JSONValue {
    static func parse(_ text: String) -> Any? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    static func canonical(_ value: Any) -> String {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        else { return String(describing: value) }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Reads timestamps from JSON objects.
enum Timestamp {
    /// The field's time in epoch milliseconds, or nil when the value is not a JSON object or the field is no date.
    static func milliseconds(in value: String, field: String) -> Double? {
        guard let object = JSONValue.parse(value) as? [String: Any], let raw = object[field] else { return nil }
        if let text = raw as? String {
            if !text.isEmpty, text.allSatisfy(\.isASCIIDigit) { return Double(text) }
            return iso8601Milliseconds(text)
        }
        // JSON booleans are NSNumbers too; they are not times.
        if let number = raw as? NSNumber, String(cString: number.objCType) != "c" {
            return number.doubleValue.isFinite ? number.doubleValue : nil
        }
        return nil
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)` as epoch milliseconds.
    static func iso8601Milliseconds(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count, range.allSatisfy({ bytes[$0] >= 48 && bytes[$0] <= 57 }) else {
                return nil
            }
            return range.reduce(0) { $0 * 10 + Int(bytes[$1] - 48) }
        }
        func byte(_ index: Int, is characters: String) -> Bool {
            index < bytes.count && characters.utf8.contains(bytes[index])
        }
        guard let year = number(0..<4), byte(4, is: "-"), let month = number(5..<7), byte(7, is: "-"),
            let day = number(8..<10), byte(10, is: "Tt "), let hour = number(11..<13), byte(13, is: ":"),
            let minute = number(14..<16), byte(16, is: ":"), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if byte(index, is: ".") {
            var scale = 0.1
            index += 1
            let start = index
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offsetMinutes = 0
        if byte(index, is: "Zz"), index + 1 == bytes.count {
            offsetMinutes = 0
        } else if byte(index, is: "+-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            guard let hours = number(index + 1..<index + 3) else { return nil }
            var next = index + 3
            if byte(next, is: ":") { next += 1 }
            guard let minutes = number(next..<next + 2), next + 2 == bytes.count, hours < 24, minutes < 60 else {
                return nil
            }
            offsetMinutes = sign * (hours * 60 + minutes)
        } else {
            return nil
        }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60) + fraction
        return seconds * 1000
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days-from-civil).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
