import Foundation

/// Metrics in the Prometheus text exposition format (0.0.4), each family written once with its `HELP` and `TYPE`
/// whatever order its samples were added in, so `promtool check metrics` accepts what several sources contributed.
public struct PrometheusExposition: Sendable {
    /// What a family's samples measure.
    public enum Kind: String, Sendable {
        /// A value that goes up and down.
        case gauge
        /// A count that only grows (its name ends in `_total`).
        case counter
    }

    private struct Family {
        let help: String
        let kind: Kind
        var samples: [String] = []
    }

    private var families: [String: Family] = [:]
    private var order: [String] = []

    public init() {}

    /// Adds a sample of `name` with `labels` (in the order given); the first sample of a family sets its help and kind.
    public mutating func add(
        _ name: String, _ kind: Kind, help: String, labels: KeyValuePairs<String, String> = [:], value: Double
    ) {
        if families[name] == nil {
            families[name] = Family(help: help, kind: kind)
            order.append(name)
        }
        let labelText = labels.map { "\($0.key)=\(Self.quoted($0.value))" }.joined(separator: ",")
        families[name]!.samples.append(
            name + (labelText.isEmpty ? "" : "{\(labelText)}") + " " + Self.number(value))
    }

    /// Declares a family that may have no samples yet, so its help is there for a scraper from the start.
    public mutating func declare(_ name: String, _ kind: Kind, help: String) {
        guard families[name] == nil else { return }
        families[name] = Family(help: help, kind: kind)
        order.append(name)
    }

    /// The exposition: every family in the order it first appeared, ending in a newline.
    public var text: String {
        var lines: [String] = []
        for name in order {
            let family = families[name]!
            lines.append("# HELP \(name) \(family.help)")
            lines.append("# TYPE \(name) \(family.kind.rawValue)")
            lines += family.samples
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A label value in double quotes, with backslash, quote and newline escaped as the format requires.
    public static func quoted(_ value: String) -> String {
        "\""
            + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }

    /// Whole numbers without a fraction, others with up to millisecond precision.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.3f", value)
    }
}
