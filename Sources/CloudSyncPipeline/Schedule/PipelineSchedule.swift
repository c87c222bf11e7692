import Foundation

/// When a pipeline is due (`schedule:` in its file): on a cron expression in a time zone, or at a fixed interval.
///
/// `validate` checks it, `plan` shows the next slots and `cloudsync serve` runs pipelines on them.
public struct PipelineSchedule: Sendable, Equatable, CustomStringConvertible {
    /// How the slots are laid out.
    public enum Slots: Sendable, Equatable {
        /// The times a cron expression names, local to a time zone.
        case cron(CronExpression, TimeZone)
        /// Every so many milliseconds, counted from the Unix epoch (so every host agrees on the slots).
        case every(milliseconds: Int64)
    }

    public var slots: Slots
    /// The most a run starts after its slot, chosen at random per slot, so pipelines sharing a slot do not all start
    /// at once; 0 for none.
    public var jitterMilliseconds: Int64 = 0
    /// Whether a slot missed while the service was down runs once when it starts.
    public var catchUp = false

    public init(slots: Slots, jitterMilliseconds: Int64 = 0, catchUp: Bool = false) {
        self.slots = slots
        self.jitterMilliseconds = jitterMilliseconds
        self.catchUp = catchUp
    }

    /// The first slot after `date`; nil for a cron expression that names no time (30 February).
    public func next(after date: Date) -> Date? {
        switch slots {
        case .cron(let expression, let zone):
            return expression.next(after: date, in: zone)
        case .every(let interval):
            let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
            let next = (milliseconds / interval + 1) * interval
            return Date(timeIntervalSince1970: Double(next) / 1000)
        }
    }

    /// The next `count` slots after `date`.
    public func upcoming(after date: Date, count: Int) -> [Date] {
        var slots: [Date] = []
        var from = date
        while slots.count < count, let slot = next(after: from) {
            slots.append(slot)
            from = slot
        }
        return slots
    }

    /// `cron "30 2 * * *" in Europe/Paris, jitter 5m, catching up` or `every 30s`.
    public var description: String {
        var text: String
        switch slots {
        case .cron(let expression, let zone): text = "cron \"\(expression.text)\" in \(zone.identifier)"
        case .every(let interval): text = "every " + DurationText.format(milliseconds: interval)
        }
        if jitterMilliseconds > 0 { text += ", jitter " + DurationText.format(milliseconds: jitterMilliseconds) }
        if catchUp { text += ", a missed slot runs once at start" }
        return text
    }
}

/// Durations as a pipeline file writes them: one or more number-and-unit groups, `ms`, `s`, `m`, `h` or `d`
/// (`90s`, `5m`, `1h30m`, `2d`).
public enum DurationText {
    private static let units: [(suffix: String, milliseconds: Int64)] = [
        ("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000),
    ]

    /// The milliseconds `text` stands for; nil when it is not such a duration (or overflows).
    public static func milliseconds(_ text: String) -> Int64? {
        var total: Int64 = 0
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, let number = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            let letters = rest.prefix { $0.isASCII && $0.isLetter }
            guard let unit = units.first(where: { $0.suffix == letters }) else { return nil }
            rest = rest.dropFirst(letters.count)
            let (product, overflow) = number.multipliedReportingOverflow(by: unit.milliseconds)
            let (sum, overflowed) = total.addingReportingOverflow(product)
            guard !overflow, !overflowed else { return nil }
            total = sum
        }
        return total
    }

    /// `milliseconds` in the largest units that divide it: `1h30m`, `90s`, `250ms`.
    public static func format(milliseconds: Int64) -> String {
        guard milliseconds > 0 else { return "0s" }
        var rest = milliseconds
        var text = ""
        for unit in units.reversed() where rest >= unit.milliseconds {
            let count = rest / unit.milliseconds
            text += "\(count)\(unit.suffix)"
            rest -= count * unit.milliseconds
        }
        return text
    }
}
