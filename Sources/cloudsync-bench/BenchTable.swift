import Foundation

/// What a row's ratio must be to meet its target: ours divided by the peer's figure, at most or at least this.
struct BenchTarget: Codable, Equatable {
    enum Bound: String, Codable { case atMost, atLeast }
    var bound: Bound
    var ratio: Double

    static func atMost(_ ratio: Double) -> BenchTarget { BenchTarget(bound: .atMost, ratio: ratio) }
    static func atLeast(_ ratio: Double) -> BenchTarget { BenchTarget(bound: .atLeast, ratio: ratio) }

    func isMet(by ratio: Double) -> Bool { bound == .atMost ? ratio <= self.ratio : ratio >= self.ratio }
    var text: String { (bound == .atMost ? "≤ " : "≥ ") + String(format: "%.2f", ratio) + "×" }
}

/// One line of the table: a measure, our median figure, the peer's median from the same invocation, and the target.
struct BenchRow: Codable, Equatable {
    /// What was measured, with its sizes (`migrate 100,000 × 1 KB directory → directory`).
    var measure: String
    /// The unit both figures are in (`s`, `µs`, `MiB/s`).
    var unit: String
    var ours: Double
    /// Who the peer is (`rclone copy`), when there is one.
    var peerName: String?
    var peer: Double?
    var target: BenchTarget?
    /// How many runs each median is of.
    var runs: Int

    var ratio: Double? { peer.map { ours / $0 } }
    var met: Bool? { target.flatMap { target in ratio.map { target.isMet(by: $0) } } }

    /// The peak memory every streamed transfer (export, import, a file) must stay under, in MB.
    static let memoryBudgetMegabytes = 100.0

    /// The median peak memory of `children` beside ``memoryBudgetMegabytes``.
    static func peakMemory(_ measure: String, of children: [ChildRun], runs: Int) -> BenchRow {
        BenchRow(
            measure: measure, unit: "MB", ours: median(children.map(\.peakMegabytes)), peerName: "budget",
            peer: memoryBudgetMegabytes, target: .atMost(1.0), runs: runs)
    }
}

/// Shared by every bench function: where to put files, how many runs to take the median of, and helpers.
struct BenchContext {
    let scratch: URL
    let runs: Int
    let clock = ContinuousClock()

    /// A fresh directory under the scratch directory.
    func directory(_ name: String) throws -> String {
        let url = scratch.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: url)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    /// The median, in seconds, of `runs` timings of `body`; `prepare` runs untimed before each, given the run's index.
    func medianSeconds(prepare: (Int) async throws -> Void = { _ in }, measure body: (Int) async throws -> Void)
        async rethrows -> Double
    {
        var timings: [Double] = []
        for run in 0..<runs {
            try await prepare(run)
            timings.append(seconds(try await clock.measure { try await body(run) }))
        }
        return median(timings)
    }

    /// Runs `command` with `/bin/sh -c`, discarding its output; stops the bench if it fails.
    func shell(_ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { fatalError("failed: \(command)") }
    }

    /// Whether `tool` is on the PATH.
    func has(_ tool: String) -> Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)")
        }
    }
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The table `make bench` prints, and `bench.json`.
enum BenchReport {
    static func figure(_ value: Double?, _ unit: String) -> String {
        guard let value else { return "—" }
        let digits = value >= 100 ? 0 : value >= 10 ? 1 : value >= 1 ? 2 : 3
        return String(format: "%.\(digits)f", value) + " " + unit
    }

    static func table(_ rows: [BenchRow]) -> String {
        let header = ["measure", "ours", "peer", "ratio", "target", "met", "runs"]
        let cells = rows.map { row -> [String] in
            var peer = "—"
            if let figure = row.peer { peer = (row.peerName ?? "peer") + ": " + Self.figure(figure, row.unit) }
            let ratio: String = row.ratio.map { String(format: "%.2f×", $0) } ?? "—"
            let target: String = row.target?.text ?? "—"
            let met: String = row.met.map { $0 ? "yes" : "NO" } ?? "—"
            return [row.measure, figure(row.ours, row.unit), peer, ratio, target, met, String(row.runs)]
        }
        return render(header, cells)
    }

    /// Two bench.json files side by side: each measure's figure before and after, and how it moved.
    static func comparison(old: [BenchRow], new: [BenchRow]) -> String {
        let earlier = Dictionary(old.map { ($0.measure, $0) }, uniquingKeysWith: { first, _ in first })
        let cells = new.map { row -> [String] in
            let before = earlier[row.measure]
            let change: String = before.map { String(format: "%.2f×", row.ours / $0.ours) } ?? "new"
            let oldRatio: String = before?.ratio.map { String(format: "%.2f×", $0) } ?? "—"
            let newRatio: String = row.ratio.map { String(format: "%.2f×", $0) } ?? "—"
            let met: String = row.met.map { $0 ? "yes" : "NO" } ?? "—"
            return [
                row.measure, figure(before?.ours, row.unit), figure(row.ours, row.unit), change, oldRatio, newRatio,
                met,
            ]
        }
        return render(["measure", "old", "new", "new/old", "old ratio", "new ratio", "met now"], cells)
    }

    private static func render(_ header: [String], _ cells: [[String]]) -> String {
        let widths = header.indices.map { column in
            ([header] + cells).map { $0[column].count }.max() ?? 0
        }
        func line(_ row: [String]) -> String {
            "| "
                + zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(
                    separator: " | ")
                + " |"
        }
        return
            ([line(header), "|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|"]
            + cells.map(line)).joined(separator: "\n")
    }

    static func write(_ rows: [BenchRow], to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(rows).write(to: URL(fileURLWithPath: path))
    }

    static func read(_ path: String) throws -> [BenchRow] {
        try JSONDecoder().decode([BenchRow].self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
