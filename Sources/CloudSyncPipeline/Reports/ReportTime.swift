import Foundation

/// Times as reports, the state and the command line write them: ISO 8601 in UTC with milliseconds
/// (`2026-12-04T02:30:00.000Z`).
///
/// One format style, a value every thread shares: building an `ISO8601DateFormatter` per call costs a quarter of a
/// millisecond, more than rendering a whole metrics answer.
public enum ReportTime {
    private static let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt)

    /// `date`, rounded to the nearest millisecond (the style alone would cut `.0099999` to `.009`).
    public static func string(_ date: Date) -> String {
        style.format(date.addingTimeInterval(0.0005))
    }

    /// `milliseconds` since 1970.
    public static func string(milliseconds: Int64) -> String {
        string(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// The time `text` writes; nil when it is not such a time.
    public static func date(_ text: String) -> Date? {
        try? style.parse(text)
    }
}

/// `milliseconds` since the epoch as the reports write times (``ReportTime/string(milliseconds:)``).
package func iso8601(_ milliseconds: Int64) -> String {
    ReportTime.string(milliseconds: milliseconds)
}
