import Foundation

/// Which snapshots `forget` keeps, with restic's `--keep-*` meanings.
///
/// Snapshots are taken in groups (one pipeline's snapshots of one source), newest first. `last` keeps the newest
/// n; `hourly`, `daily`, `weekly`, `monthly` and `yearly` each keep the newest snapshot of each of the last n
/// hours, days, ISO weeks, months or years that have one (in UTC); `within` keeps every snapshot taken after the
/// group's newest less that span (in calendar years, months, days and hours, as restic counts them). A snapshot any
/// rule keeps is kept.
public struct KeepPolicy: Sendable, Equatable {
    public var last = 0
    public var hourly = 0
    public var daily = 0
    public var weekly = 0
    public var monthly = 0
    public var yearly = 0
    /// How long before the group's newest snapshot every snapshot is kept; nil for none.
    public var within: Span?

    /// A span of calendar time, as `within` takes it: `1y6m`, `30d`, `2w`, `12h` (units run together).
    public struct Span: Sendable, Equatable, CustomStringConvertible {
        public var years = 0
        public var months = 0
        public var days = 0
        public var hours = 0

        /// The span `text` writes, or nil when it is not one: whole numbers each followed by `y`, `m` (months), `w`
        /// (7 days), `d` or `h`, at least one of them above 0.
        public init?(_ text: String) {
            var digits = ""
            for character in text {
                if character.isASCII && character.isNumber {
                    digits.append(character)
                    continue
                }
                guard let number = Int(digits), number <= 100_000 else { return nil }
                digits = ""
                switch character {
                case "y": years += number
                case "m": months += number
                case "w": days += 7 * number
                case "d": days += number
                case "h": hours += number
                default: return nil
                }
            }
            guard digits.isEmpty, years + months + days + hours > 0 else { return nil }
        }

        public var description: String {
            [(years, "y"), (months, "m"), (days, "d"), (hours, "h")].filter { $0.0 > 0 }.map { "\($0.0)\($0.1)" }
                .joined()
        }

        /// `date` less this span, in UTC.
        func before(_ date: Date, in calendar: Calendar) -> Date {
            let components = DateComponents(year: -years, month: -months, day: -days, hour: -hours)
            return calendar.date(byAdding: components, to: date) ?? date
        }
    }

    /// The rules' names as pipeline files write them.
    public static let ruleNames = ["last", "hourly", "daily", "weekly", "monthly", "yearly", "within"]

    /// A policy keeping nothing by itself; set the rules you want.
    public init() {}

    /// Whether no rule is set: such a policy would forget every snapshot, so `forget` refuses it.
    public var isEmpty: Bool {
        last == 0 && hourly == 0 && daily == 0 && weekly == 0 && monthly == 0 && yearly == 0 && within == nil
    }

    /// The ids of the snapshots of one group the policy keeps.
    public func kept(_ group: [SnapshotSummary]) -> Set<String> {
        let newestFirst = group.sorted { ($0.time, $0.id) > ($1.time, $1.id) }
        guard let newest = newestFirst.first else { return [] }
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        // Each bucketed rule: how many more buckets it may keep, and the bucket it kept last.
        var rules: [(remaining: Int, unit: (Date) -> Int, lastBucket: Int?)] = [
            (last, { _ in 0 }, nil),
            (hourly, { date in Self.bucket(calendar, [.year, .month, .day, .hour], date) }, nil),
            (daily, { date in Self.bucket(calendar, [.year, .month, .day], date) }, nil),
            (weekly, { date in Self.bucket(calendar, [.yearForWeekOfYear, .weekOfYear], date) }, nil),
            (monthly, { date in Self.bucket(calendar, [.year, .month], date) }, nil),
            (yearly, { date in Self.bucket(calendar, [.year], date) }, nil),
        ]
        let newestDate = Date(timeIntervalSince1970: Double(newest.time) / 1000)
        let withinLimit = within.map { $0.before(newestDate, in: calendar) }
        var keep: Set<String> = []
        for (position, snapshot) in newestFirst.enumerated() {
            let date = Date(timeIntervalSince1970: Double(snapshot.time) / 1000)
            if let withinLimit, date > withinLimit { keep.insert(snapshot.id) }
            for index in rules.indices where rules[index].remaining > 0 {
                // `last` keeps each snapshot on its own: its bucket is its position.
                let bucket = index == 0 ? position : rules[index].unit(date)
                if bucket != rules[index].lastBucket {
                    rules[index].lastBucket = bucket
                    rules[index].remaining -= 1
                    keep.insert(snapshot.id)
                }
            }
        }
        return keep
    }

    private static func bucket(_ calendar: Calendar, _ units: [Calendar.Component], _ date: Date) -> Int {
        let parts = calendar.dateComponents(Set(units), from: date)
        return units.reduce(0) { $0 * 100 + (parts.value(for: $1) ?? 0) }
    }
}
