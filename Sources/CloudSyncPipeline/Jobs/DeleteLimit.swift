import Foundation

/// The most deletions a sync job may make before it stops, from its `maxDeletes`.
public enum DeleteLimit: Sendable, Equatable {
    /// At most this many keys.
    case count(Int)
    /// At most this percentage of the keys the last sync left.
    case percent(Double)

    /// The default: half the keys, as rclone's bisync allows.
    public static let standard = DeleteLimit.percent(50)

    /// The limit as written in a pipeline file: a whole number, or a percentage like `"50%"`.
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("%") {
            guard let value = Double(trimmed.dropLast()), value >= 0, value <= 100 else { return nil }
            self = .percent(value)
        } else {
            guard let value = Int(trimmed), value >= 0 else { return nil }
            self = .count(value)
        }
    }

    /// How many deletions it allows when the last sync left `snapshotKeys` keys.
    func allowed(snapshotKeys: Int) -> Int {
        switch self {
        case .count(let count): return count
        case .percent(let percent): return Int((Double(snapshotKeys) * percent / 100).rounded(.down))
        }
    }

    /// As written: `50%` or `1000`.
    public var description: String {
        switch self {
        case .count(let count): return "\(count)"
        case .percent(let percent):
            return percent == percent.rounded() ? "\(Int(percent))%" : "\(percent)%"
        }
    }
}
