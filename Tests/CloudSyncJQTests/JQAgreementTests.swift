import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncJQ

/// Seeded JSON values of the shapes settings take: objects keyed by a few names (so programs find them), arrays,
/// strings with escapes and non-ASCII text, integers and fractions, booleans and null, nested a few levels.
enum RandomJSON {
    static let keys = ["a", "b", "theme", "x y", "é", "", "settings"]
    static let strings = ["dark", "light", "", "a\"quote", "tab\there", "snow ☃", "Ab", "3", "aXbXc"]

    static func value(depth: Int = 0, using random: inout SeededRandom) -> String {
        let kind = Int.random(in: depth >= 3 ? 0...4 : 0...6, using: &random)
        switch kind {
        case 0: return "null"
        case 1: return Bool.random(using: &random) ? "true" : "false"
        case 2: return String(Int.random(in: -1_000...1_000_000, using: &random))
        case 3:
            return String(Int.random(in: -500...500, using: &random)) + "."
                + String(Int.random(in: 0...99, using: &random))
        case 4: return quoted(strings.randomElement(using: &random)!)
        case 5:
            let count = Int.random(in: 0...4, using: &random)
            return "[" + (0..<count).map { _ in value(depth: depth + 1, using: &random) }.joined(separator: ",") + "]"
        default:
            let count = Int.random(in: 0...4, using: &random)
            let members = (0..<count).map { _ in
                quoted(keys.randomElement(using: &random)!) + ":" + value(depth: depth + 1, using: &random)
            }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    static func quoted(_ text: String) -> String {
        "\""
            + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\t", with: "\\t") + "\""
    }
}

/// The sandbox's results against the `jq` command's (Debian's jq, a process of its own reading the same values):
/// outputs byte for byte and errors by message, value by value.
@Suite struct JQAgreementTests {
    /// Twenty programs of the kinds migrations run: reshaping, lookups that fail on some types, several outputs, none,
    /// errors of jq's own and raised ones, string and number builtins, definitions.
    static let programs = [
        ".",
        ".theme",
        "{appearance: {theme: .theme}}",
        ".a // \"none\"",
        "keys",
        "length",
        "type",
        "to_entries | map(.key)",
        "with_entries(.key |= ascii_upcase)",
        ".[]",
        "select(type == \"object\") | .settings",
        "if type == \"array\" then sort else [.] end",
        "tostring | ascii_downcase",
        ".. | numbers",
        "paths | map(tostring) | join(\"/\")",
        "tojson | fromjson == .",
        "def double: . * 2; .. | numbers | double",
        "if type == \"number\" then error(\"numbers are refused\") else . end",
        "[splits(\"X\")]",
        "(.theme | ascii_downcase)? // empty, del(.a)?",
    ]

    @Test func twoHundredValuesUnderTwentyProgramsGiveWhatTheJQCommandGives() async throws {
        var random = SeededRandom(seed: 60)
        let values = (0..<200).map { _ in RandomJSON.value(using: &random) }
        let directory = try TemporaryDirectory()
        let valuesFile = URL(fileURLWithPath: directory.file("values.json"))
        try Data(values.joined(separator: "\n").utf8).write(to: valuesFile)
        var compared = 0
        for (index, program) in Self.programs.enumerated() {
            let expected = try await commandResults(program, valuesFile: valuesFile, in: directory, index: index)
            try #require(expected.count == values.count, "jq gave \(expected.count) results for \(program)")
            let sandbox = try JQSandbox(
                program: program, limits: JQLimits(maxOutputs: 10_000),
                executable: try ProcessRunner.builtProduct("cloudsync-jq"))
            let results = await sandbox.run(values.map { Array($0.utf8) })
            for (value, (result, command)) in zip(values, zip(results, expected)) {
                #expect(result.outputs == command.outputs, "\(program) on \(value)")
                #expect(result.error == command.error, "\(program) on \(value)")
                compared += 1
            }
        }
        #expect(compared == 4_000)
    }

    /// What the `jq` command makes of each line of `valuesFile` under `program`.
    ///
    /// Each result is its outputs, then the error that stopped it. The command runs the program inside `try`, so each value's outputs and error come on standard
    /// output in order, each as one line, and a `{"d":1}` line ends each value's.
    private func commandResults(_ program: String, valuesFile: URL, in directory: TemporaryDirectory, index: Int)
        async throws -> [JQResult]
    {
        let programFile = URL(fileURLWithPath: directory.file("program-\(index).jq"))
        try Data("(try ((\(program)\n) | {o: .}) catch {e: .}), {d: 1}".utf8).write(to: programFile)
        let run = try await ProcessRunner.run("/usr/bin/jq", ["-c", "-f", programFile.path, valuesFile.path])
        #expect(run.status == 0, "jq failed: \(run.standardError)")
        var results: [JQResult] = []
        var current = JQResult()
        for line in run.standardOutput.split(separator: "\n") {
            if line == #"{"d":1}"# {
                results.append(current)
                current = JQResult()
            } else if line.hasPrefix(#"{"o":"#) {
                current.outputs.append(String(line.dropFirst(5).dropLast()))
            } else {
                let message = try JSONSerialization.jsonObject(with: Data(line.utf8), options: .fragmentsAllowed)
                current.error = (message as? [String: Any])?["e"] as? String ?? String(line)
            }
        }
        return results
    }
}
