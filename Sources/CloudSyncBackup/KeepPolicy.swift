import Foundation

/// Which snapshots `forget` keeps, with restic's `--keep-*` meanings.
///
/// Snapshots are taken in groups (one pipeline's snapshots of one source), newest first. `last` keeps the newest
/// n; `hourly`, `daily`, `weekly`, `monthly` and `yearly` each keep the newest snapshot of each of the last n
/// hours, days, ISO weeks, months or years that have one (in UTC); `within` keeps every snapshot taken within that
/// long before the group's newest. A snapshot any rule keeps is kept.
public struct KeepPolicy: Sendable, Equatable {
    public var last = 0
    public var hourly = 0
    public var daily = 0
    public var weekly = 0
    public var monthly = 0
    public var yearly = 0
    /// Milliseconds before the group's newest snapshot within which every snapshot is kept; nil for none.
    public var within: Int64?

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
        var keep: Set<String> = []
        for (position, snapshot) in newestFirst.enumerated() {
            let date = Date(timeIntervalSince1970: Double(snapshot.time) / 1000)
            if let within, snapshot.time >= newest.time - within { keep.insert(snapshot.id) }
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

    /// A duration as `within` takes it: whole numbers with units `y` (365 days), `m` (30 days), `w`, `d`, `h`,
    /// run together like `1y6m`, `30d` or `12h`; nil when the text is not one.
    public static func duration(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["y": 365 * 86_400, "m": 30 * 86_400, "w": 7 * 86_400, "d": 86_400, "h": 3_600]
        var total: Int64 = 0
        var digits = ""
        for character in text {
            if character.isASCII && character.isNumber {
                digits.append(character)
            } else if let seconds = units[character], let number = Int64(digits), number <= 100_000 {
                total += number * seconds
                digits = ""
            } else {
                return nil
            }
        }
        return digits.isEmpty && total > 0 ? total * 1000 : nil
    }
}
