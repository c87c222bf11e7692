import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// Cron expressions and intervals as `schedule:` reads them: what each field accepts, the day rule, daylight saving
/// time, and the same next times as croniter, an independent implementation, over random expressions.
@Suite struct CronExpressionTests {
    private let utc = TimeZone(identifier: "UTC")!
    private let paris = TimeZone(identifier: "Europe/Paris")!

    private func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    private func next(_ expression: String, after: String, in zone: TimeZone? = nil) throws -> String? {
        try CronExpression(parsing: expression).next(after: date(after), in: zone ?? utc).map {
            ISO8601DateFormatter().string(from: $0)
        }
    }

    @Test func fieldsTakeListsRangesStepsAndNames() throws {
        #expect(try next("30 2 * * *", after: "2026-12-04T10:00:00Z") == "2026-12-05T02:30:00Z")
        #expect(try next("*/15 * * * *", after: "2026-12-04T10:07:00Z") == "2026-12-04T10:15:00Z")
        #expect(try next("5/20 * * * *", after: "2026-12-04T10:26:00Z") == "2026-12-04T10:45:00Z")
        #expect(try next("0 9 * JAN-mar Mon-Fri", after: "2026-12-04T10:00:00Z") == "2027-01-01T09:00:00Z")
        #expect(try next("0 0 * * 7", after: "2026-12-04T10:00:00Z") == "2026-12-06T00:00:00Z", "7 is Sunday")
        #expect(try next("0 8 1,15 * *", after: "2026-12-04T10:00:00Z") == "2026-12-15T08:00:00Z")
        #expect(try next("@weekly", after: "2026-12-04T10:00:00Z") == "2026-12-06T00:00:00Z")
        #expect(try next("@hourly", after: "2026-12-04T10:00:00Z") == "2026-12-04T11:00:00Z")
        #expect(try next("0 0 30 2 *", after: "2026-12-04T10:00:00Z") == nil, "30 February never comes")
    }

    /// Both day fields restricted: either matches (the 13th, or a Friday); one starred: both must.
    @Test func restrictedDayFieldsMatchEitherDay() throws {
        #expect(try next("0 0 13 * fri", after: "2026-12-04T10:00:00Z") == "2026-12-11T00:00:00Z")
        #expect(try next("0 0 13 * *", after: "2026-12-04T10:00:00Z") == "2026-12-13T00:00:00Z")
        #expect(try next("0 0 * * fri", after: "2026-12-05T10:00:00Z") == "2026-12-11T00:00:00Z")
    }

    /// Europe/Paris skips 02:00–03:00 on 29 March 2026 and repeats 02:00–03:00 on 25 October 2026.
    @Test func slotsInDaylightSavingChangesRunOnce() throws {
        // Skipped: the slot runs at the first minute after the change (03:00 CEST), and the day after as usual.
        #expect(try next("30 2 * * *", after: "2026-03-28T12:00:00Z", in: paris) == "2026-03-29T01:00:00Z")
        #expect(try next("30 2 * * *", after: "2026-03-29T01:00:00Z", in: paris) == "2026-03-30T00:30:00Z")
        // Repeated: the first 02:30 (CEST) only.
        #expect(try next("30 2 * * *", after: "2026-10-24T12:00:00Z", in: paris) == "2026-10-25T00:30:00Z")
        #expect(try next("30 2 * * *", after: "2026-10-25T00:30:00Z", in: paris) == "2026-10-26T01:30:00Z")
    }

    @Test(arguments: [
        ("61 * * * *", "not a valid minute"), ("* 24 * * *", "not a valid hour"), ("* * 0 * *", "day of the month"),
        ("* * * 13 *", "not a valid month"), ("* * * * 8", "day of the week"), ("* * *", "five fields"),
        ("*/0 * * * *", "step"), ("5-1 * * * *", "backwards"), ("@often", "shorthand"), ("* * * foo *", "month"),
    ])
    func badExpressionsSayWhichFieldAndWhatItTakes(expression: String, words: String) {
        #expect {
            _ = try CronExpression(parsing: expression)
        } throws: { error in
            "\(error)".contains(words)
        }
    }

    /// `plan` shows the rule and the next five slots, in the schedule's own time zone.
    @Test func thePlanShowsTheNextFiveSlots() throws {
        let directory = try TemporaryDirectory()
        let source = """
            version: 1
            name: nightly
            schedule: { cron: "30 2 * * *", timezone: Europe/Paris, jitter: 5m, catchUp: true }
            providers:
              primary: { type: sqlite, path: data/p.db, create: true }
            store:
              providers: [primary]
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry)
        let plan = PipelinePlan(
            try PipelineCompiler.compile(spec, environment: [:]), now: date("2026-12-04T10:00:00Z"))
        #expect(
            plan.text().contains(
                "schedule: cron \"30 2 * * *\" in Europe/Paris, jitter 5m, a missed slot runs once at start\n"
                    + "  next: 2026-12-05T02:30:00+01:00, 2026-12-06T02:30:00+01:00, 2026-12-07T02:30:00+01:00, "
                    + "2026-12-08T02:30:00+01:00, 2026-12-09T02:30:00+01:00\n"), "\(plan.text())")
        #expect(plan.schedule?.next.count == 5)
    }

    @Test func intervalsCountFromTheEpochSoEveryHostAgrees() {
        let schedule = PipelineSchedule(slots: .every(milliseconds: 30_000))
        let slots = schedule.upcoming(after: Date(timeIntervalSince1970: 45), count: 3)
        #expect(slots.map(\.timeIntervalSince1970) == [60, 90, 120])
    }

    @Test func durationsReadAndWriteAsTheFileDoes() {
        #expect(DurationText.milliseconds("1h30m") == 5_400_000)
        #expect(DurationText.milliseconds("90s") == 90_000)
        #expect(DurationText.milliseconds("250ms") == 250)
        #expect(DurationText.milliseconds("2d") == 172_800_000)
        for bad in ["", "5", "m", "5x", "5M", "-5s", "5 s", "99999999999999999999d"] {
            #expect(DurationText.milliseconds(bad) == nil, "\(bad)")
        }
        for value: Int64 in [250, 90_000, 5_400_000, 172_800_000, 3_723_004] {
            #expect(DurationText.milliseconds(DurationText.format(milliseconds: value)) == value)
        }
        #expect(DurationText.format(milliseconds: 5_400_000) == "1h30m")
    }

    /// Random expressions (lists, ranges, steps, names; a step on `*` only in fields where Vixie cron and croniter
    /// read it alike, and no `N-N` range, which croniter reads as every value) and random starts: the next five times
    /// in UTC are croniter's.
    @Test func nextTimesAreCronitersOverRandomExpressions() async throws {
        var random = SeededRandom(seed: 35)
        func item(_ bounds: ClosedRange<Int>, names: [String] = [], star: Bool = true) -> String {
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where star: return "*"
            case 1 where star: return "*/\(Int.random(in: 2...7, using: &random))"
            case 2:
                // Never `N-N`: croniter reads it as every value, where Vixie cron (and this) read N.
                let low = Int.random(in: bounds.lowerBound...(bounds.upperBound - 1), using: &random)
                let high = Int.random(in: (low + 1)...bounds.upperBound, using: &random)
                return "\(low)-\(high)"
                    + (Bool.random(using: &random) ? "/\(Int.random(in: 2...4, using: &random))" : "")
            case 3 where !names.isEmpty:
                return names[Int.random(in: 0..<names.count, using: &random)]
            default:
                return (0..<Int.random(in: 1...3, using: &random)).map { _ in
                    String(Int.random(in: bounds, using: &random))
                }.joined(separator: ",")
            }
        }
        var cases: [[String: Any]] = []
        for _ in 0..<300 {
            let restrictDays = Bool.random(using: &random)
            let expression = [
                item(0...59), item(0...23), restrictDays ? item(1...28, star: false) : "*",
                item(1...12, names: ["jan", "apr", "jul", "oct"]),
                restrictDays && Bool.random(using: &random) ? "*" : item(0...6, names: ["mon", "fri"], star: false),
            ].joined(separator: " ")
            let start = Date(
                timeIntervalSince1970: Double(Int.random(in: 1_577_836_800...1_893_456_000, using: &random)))
            let parsed = try CronExpression(parsing: expression)
            let ours = PipelineSchedule(slots: .cron(parsed, utc)).upcoming(after: start, count: 5)
            cases.append([
                "expression": expression, "start": Int(start.timeIntervalSince1970),
                "ours": ours.map { Int($0.timeIntervalSince1970) },
            ])
        }
        let directory = try TemporaryDirectory()
        let input = directory.file("cases.json")
        try JSONSerialization.data(withJSONObject: cases).write(to: URL(fileURLWithPath: input))
        let python = repositoryRoot + "/.build/pyenv/bin/python3"
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "the tests' Python environment is missing: run `make test`")
        let result = try await ProcessRunner.run(python, [repositoryRoot + "/scripts/croniter_next.py", input])
        try #require(result.status == 0, "\(result.standardError)")
        let theirs = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[Int]])
        try #require(theirs.count == cases.count)
        var disagreements: [String] = []
        for (index, answer) in theirs.enumerated() where answer != cases[index]["ours"] as? [Int] {
            disagreements.append(
                "\(cases[index]["expression"]!) after \(cases[index]["start"]!): ours \(cases[index]["ours"]!), croniter \(answer)"
            )
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5).joined(separator: "\n"))")
    }
}
