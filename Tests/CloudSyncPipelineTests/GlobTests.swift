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

    @Test(arguments: [
        ("user[0-9", "opens a [ class it never closes"), ("[z-a]", "has the range z-a, which runs backwards"),
        ("trailing\\", "ends with a lone \\"),
    ])
    func aMalformedPatternIsAnErrorNotAFilterThatMatchesNothing(_ pattern: String, _ expected: String) {
        #expect(throws: Glob.SyntaxError.self) { try Glob(pattern) }
        do { _ = try Glob(pattern) } catch { #expect(error.message.contains(expected), "\(error.message)") }
    }
}
