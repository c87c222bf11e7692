import Foundation

/// A five-field cron expression (`minute hour day-of-month month day-of-week`), as Vixie cron reads it: lists,
/// ranges, steps (`*/15`, `1-30/5`, `5/10`), month and weekday names (`jan`–`dec`, `sun`–`sat`, any case), 7 for
/// Sunday as well as 0, and `@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually`.
///
/// When both the day of the month and the day of the week are restricted (neither starts with `*`), a day matches
/// when either does, as in every cron since Vixie's. Times are local to the schedule's time zone: a slot in the hour a
/// change to summer time skips runs at the first minute after the change, and a slot in the hour a change back repeats
/// runs once, at its first occurrence.
public struct CronExpression: Sendable, Equatable, CustomStringConvertible {
    /// The expression as written.
    public let text: String
    let minutes: [Int]
    let hours: [Int]
    let daysOfMonth: Set<Int>
    let months: Set<Int>
    /// 0 is Sunday.
    let daysOfWeek: Set<Int>
    let dayOfMonthRestricted: Bool
    let dayOfWeekRestricted: Bool

    /// Why an expression was refused, in words that say what to write instead.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    private static let macros = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]
    private static let monthNames = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    private static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    /// Parses `text`; throws naming the field and what it may hold.
    public init(parsing text: String) throws(ParseError) {
        self.text = text
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let expanded: String
        if trimmed.hasPrefix("@") {
            guard let macro = Self.macros[trimmed.lowercased()] else {
                throw ParseError(
                    message: "\(trimmed) is not a cron shorthand; write @hourly, @daily, @weekly, @monthly or @yearly, "
                        + "or five fields")
            }
            expanded = macro
        } else {
            expanded = trimmed
        }
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw ParseError(
                message: "a cron expression has five fields (minute hour day-of-month month day-of-week), such as "
                    + "\"30 2 * * *\"; found \(fields.count)")
        }
        minutes = try Self.field(fields[0], "minute", 0...59, names: [], offset: 0).sorted()
        hours = try Self.field(fields[1], "hour", 0...23, names: [], offset: 0).sorted()
        daysOfMonth = try Self.field(fields[2], "day of the month", 1...31, names: [], offset: 0)
        months = try Self.field(fields[3], "month", 1...12, names: Self.monthNames, offset: 1)
        // 7 is Sunday too.
        daysOfWeek = Set(
            try Self.field(fields[4], "day of the week", 0...7, names: Self.dayNames, offset: 0).map { $0 % 7 })
        dayOfMonthRestricted = !fields[2].hasPrefix("*")
        dayOfWeekRestricted = !fields[4].hasPrefix("*")
    }

    public var description: String { text }

    /// The values one field allows: a comma-separated list of `*`, `N`, `N-M`, each optionally `/STEP`.
    private static func field(_ text: String, _ name: String, _ bounds: ClosedRange<Int>, names: [String], offset: Int)
        throws(ParseError) -> Set<Int>
    {
        var values: Set<Int> = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw invalid(text, name, bounds, names) }
            var step = 1
            if parts.count == 2 {
                guard let given = Int(parts[1]), given >= 1, given <= bounds.upperBound - bounds.lowerBound + 1 else {
                    throw ParseError(
                        message: "the step in \"\(text)\" (the \(name)) must be a whole number from 1 to "
                            + "\(bounds.upperBound - bounds.lowerBound + 1)")
                }
                step = given
            }
            let range = parts[0]
            var low: Int
            var high: Int
            if range == "*" {
                (low, high) = (bounds.lowerBound, bounds.upperBound)
            } else if let dash = range.firstIndex(of: "-") {
                low = try value(range[..<dash], text, name, bounds, names, offset)
                high = try value(range[range.index(after: dash)...], text, name, bounds, names, offset)
                guard low <= high else {
                    throw ParseError(
                        message: "the range \"\(range)\" in the \(name) runs backwards; write the smaller value first")
                }
            } else {
                low = try value(range, text, name, bounds, names, offset)
                // `5/10` is every 10th value from 5 on.
                high = parts.count == 2 ? bounds.upperBound : low
            }
            for value in stride(from: low, through: high, by: step) { values.insert(value) }
        }
        return values
    }

    private static func value(
        _ text: Substring, _ whole: String, _ name: String, _ bounds: ClosedRange<Int>, _ names: [String],
        _ offset: Int
    ) throws(ParseError) -> Int {
        if let number = Int(text), bounds.contains(number) { return number }
        if let index = names.firstIndex(of: text.lowercased()) { return index + offset }
        throw invalid(whole, name, bounds, names)
    }

    private static func invalid(_ text: String, _ name: String, _ bounds: ClosedRange<Int>, _ names: [String])
        -> ParseError
    {
        ParseError(
            message: "\"\(text)\" is not a valid \(name): use numbers from \(bounds.lowerBound) to \(bounds.upperBound)"
                + (names.isEmpty ? "" : " or names (\(names.first!)–\(names.last!))")
                + ", `*`, ranges such as 1-5, lists such as 1,15 and steps such as */10")
    }

    /// Whether a local day matches: its month, and its day of the month or of the week (`weekday` 0 for Sunday).
    func matches(month: Int, day: Int, weekday: Int) -> Bool {
        guard months.contains(month) else { return false }
        let byDay = daysOfMonth.contains(day)
        let byWeekday = daysOfWeek.contains(weekday)
        if dayOfMonthRestricted && dayOfWeekRestricted { return byDay || byWeekday }
        return byDay && byWeekday
    }

    /// The first time after `date` the expression names, in `timeZone`; nil when none comes within eight years
    /// (30 February never does).
    public func next(after date: Date, in timeZone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var day = calendar.startOfDay(for: date)
        for _ in 0..<(366 * 8) {
            let parts = calendar.dateComponents([.month, .day, .weekday], from: day)
            if let month = parts.month, let dayOfMonth = parts.day, let weekday = parts.weekday,
                matches(month: month, day: dayOfMonth, weekday: weekday - 1)
            {
                for hour in hours {
                    for minute in minutes {
                        // A local time the clocks skip is the first one after the change; a repeated one, its first.
                        if let time = calendar.date(
                            bySettingHour: hour, minute: minute, second: 0, of: day, matchingPolicy: .nextTime,
                            repeatedTimePolicy: .first, direction: .forward), time > date
                        {
                            return time
                        }
                    }
                }
            }
            guard let following = calendar.date(byAdding: .day, value: 1, to: day) else { return nil }
            day = calendar.startOfDay(for: following)
        }
        return nil
    }
}
