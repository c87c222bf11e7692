import CloudSync
import Testing

/// Renames by pattern: what they rename, what they keep, what they refuse when made, and that no two keys ever take
/// one name, checked against a plain dictionary over seeded key sets.
@Suite struct KeyRenameTests {
    @Test func capturesFillTheTargetInAnyOrderAndOtherKeysKeepTheirNames() throws {
        let prefs = try KeyRename(from: "settings.*", to: "prefs.{1}")
        #expect(prefs.target(of: "settings.theme") == "prefs.theme")
        #expect(prefs.target(of: "settings.") == "prefs.")
        #expect(prefs.target(of: "other.theme") == "other.theme")
        let swap = try KeyRename(from: "users/*/settings/*", to: "settings/{2}/of/{1}")
        #expect(swap.target(of: "users/ann/settings/theme") == "settings/theme/of/ann")
        #expect(swap.source(of: "settings/theme/of/ann") == "users/ann/settings/theme")
        let one = try KeyRename(from: "a\\*b", to: "c\\{1}")
        #expect(one.target(of: "a*b") == "c{1}")
    }

    @Test func aKeyWhoseNameAnotherKeyCouldTakeHasNone() throws {
        let prefs = try KeyRename(from: "settings.*", to: "prefs.{1}")
        // Kept under its own name it would collide with settings.theme's new name.
        #expect(prefs.target(of: "prefs.theme") == nil)
        #expect(prefs.target(of: "prefsXtheme") == "prefsXtheme")
    }

    @Test(arguments: [
        ("settings.*", "prefs", "drops capture {1}"),
        ("a.*.b.*", "x.{2}", "drops capture {1}"),
        ("a.*", "{1}.{1}", "uses capture {1} 2 times"),
        ("*.*", "{2}{1}", "side by side"),
        ("**", "{1}", "two * side by side"),
        ("a?", "b", "takes only *"),
        ("[ab]*", "{1}", "takes only *"),
        ("a.*", "b.{2}", "names {2}"),
        ("a", "b.{1}", "names {1}"),
        ("a.*", "b.{1", "names {1"),
        ("a\\", "b", "lone \\"),
    ])
    func patternsThatCouldMapTwoKeysToOneOrDoNotParseAreRefused(from: String, to: String, says: String) {
        let problem = #expect(throws: KeyRename.Problem.self) { try KeyRename(from: from, to: to) }
        #expect(problem?.message.contains(says) == true, "\(problem?.message ?? "")")
    }

    /// Over seeded random key sets and renames, every key given a name comes back from it, and no two keys share a
    /// name: a dictionary from names to keys finds no clash.
    @Test(arguments: 0..<40 as Range<UInt64>)
    func noTwoKeysEverTakeOneName(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let alphabet: [Character] = ["a", "b", ".", "/", "x"]
        func word(_ length: ClosedRange<Int>) -> String {
            String((0..<Int.random(in: length, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
        }
        let sources = ["*.*", "a*", "*/b*", "*", "a.*/*x"]
        let targets = ["{1}/{2}", "b{1}", "{2}.{1}", "x.{1}", "{2}a.{1}"]
        let choice = Int.random(in: 0..<sources.count, using: &random)
        let rename = try KeyRename(from: sources[choice], to: targets[choice])
        var owners: [String: String] = [:]
        for key in Set((0..<400).map { _ in word(0...7) }) {
            guard let name = rename.target(of: key) else { continue }
            #expect(rename.source(of: name) == key)
            if let other = owners.updateValue(key, forKey: name) {
                Issue.record("\(other) and \(key) both take \(name) under \(rename)")
            }
        }
        #expect(owners.count > 50, "too few keys renamed to test anything")
    }
}
