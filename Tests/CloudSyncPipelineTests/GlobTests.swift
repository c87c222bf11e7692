import CloudSync
import Testing

@testable import CloudSyncPipeline

@Suite struct GlobTests {
    @Test(arguments: [
        ("settings.*", "settings.theme", true), ("settings.*", "settings.", true), ("settings.*", "setting", false),
        ("*.theme", "a.b.theme", true), ("k?", "k1", true), ("k?", "k", false), ("k?", "k12", false),
        ("user[0-9]", "user7", true), ("user[0-9]", "userx", false), ("user[!0-9]", "userx", true),
        ("user[^0-9]", "user7", false), ("[abc]*", "banana", true), ("[abc]*", "dates", false),
        ("draft-[a-c]?", "draft-b2", true), ("[]]", "]", true), ("[a-]", "-", true), ("a\\*", "a*", true),
        ("a\\*", "ab", false), ("*", "", true), ("", "", true), ("", "x", false), ("é*", "été", true),
    ])
    func matchesLikeAShell(_ pattern: String, _ text: String, _ expected: Bool) throws {
        #expect(try Glob(pattern).matches(text) == expected, "\(pattern) ~ \(text)")
    }

    /// Every key a set of patterns matches falls in the range a listing is bounded to, whatever the patterns and
    /// keys: random ones from a small alphabet (so they share prefixes and meet the boundaries), with the largest
    /// characters too, where the range's upper end carries.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyKeyThePatternsMatchIsInTheirListingRange(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let alphabet: [String] = ["a", "b", ".", "z", "\u{FFFF}", "\u{10FFFF}", "\u{D7FF}", "é"]
        func text(_ length: Int) -> String {
            (0..<length).map { _ in alphabet.randomElement(using: &random)! }.joined()
        }
        var checked = 0
        for _ in 0..<400 {
            let patterns = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                text(Int.random(in: 0...3, using: &random)) + (Bool.random(using: &random) ? "*" : "")
            }
            let range = keyRange(of: patterns)
            for _ in 0..<30 {
                // Keys built from a pattern's own start, so that many match.
                let base = patterns.randomElement(using: &random)!.replacingOccurrences(of: "*", with: "")
                let key =
                    String(base.prefix(Int.random(in: 0...base.count, using: &random)))
                    + text(Int.random(in: 0...3, using: &random))
                guard patterns.contains(where: { globMatches($0, key) }) else { continue }
                checked += 1
                #expect(range.contains(key), "\(patterns) match \(key.unicodeScalars.map(\.value)) outside \(range)")
            }
        }
        #expect(checked > 1_000)
        #expect(keyRange(of: ["settings.*", "settings.theme"]) == KeyRange(after: "settings", through: "settings/"))
        #expect(keyRange(of: ["a*", "b*"]) == .all)
        #expect(keyRange(of: nil) == .all)
    }

    @Test(arguments: [
        ("user[0-9", "opens a [ class it never closes"), ("[z-a]", "has the range z-a, which runs backwards"),
        ("trailing\\", "ends with a lone \\"),
    ])
    func aMalformedPatternIsAnErrorNotAFilterThatMatchesNothing(_ pattern: String, _ expected: String) {
        #expect(throws: Glob.SyntaxError.self) { try Glob(pattern) }
        do { _ = try Glob(pattern) } catch { #expect(error.message.contains(expected), "\(error.message)") }
    }
}
