import CloudSync
import Testing

@testable import CloudSyncLocal

/// What one walk of a directory provider keeps: the smallest keys after the cursor, in bytewise (UTF-8) order,
/// whatever order the directory returned them in.
@Suite struct SmallestKeysTests {
    /// Keys whose bytewise order differs from Swift's `<` and from the order of their encoded file names: upper case
    /// (escaped, `%41`), non-ASCII, canonically equivalent spellings of `é`, a key that is a prefix of another, bytes
    /// above 0x7F against ASCII.
    static let keys = [
        "a", "A", "ab", "a.b", "a-b", "a_b", "Zebra", "zebra", "é", "e\u{301}", "f", "日本", "🌍", "~", " space",
        "0", "00", "key.00010", "key.0001", "key.00009", "\u{7F}", "\u{80}", "ÿ", "%41", "+piece", "=piece",
    ]

    private func gathered(_ keys: [String], after cursor: String?, keeping: Int) -> (keys: [String], truncated: Bool) {
        var smallest = SmallestKeys(after: cursor, keeping: keeping)
        for key in keys {
            var key = key
            key.withUTF8 { smallest.offer($0) }
        }
        return (smallest.sortedKeys().keys, smallest.truncated)
    }

    @Test func keysComeOutInBytewiseOrder() {
        var generator = SystemRandomNumberGenerator()
        let expected = Self.keys.sorted(by: StoreKey.bytesPrecede)
        for _ in 0..<20 {
            let result = gathered(Self.keys.shuffled(using: &generator), after: nil, keeping: 1000)
            #expect(result.keys == expected)
            #expect(!result.truncated)
        }
        // Canonically equivalent, yet two keys.
        #expect(expected.filter { $0 == "é" }.count == 2)
    }

    @Test func onlyKeysAfterTheCursorAreKept() {
        let sorted = Self.keys.sorted(by: StoreKey.bytesPrecede)
        for (index, cursor) in sorted.enumerated() {
            #expect(gathered(Self.keys.reversed(), after: cursor, keeping: 1000).keys == Array(sorted[(index + 1)...]))
        }
        #expect(gathered(Self.keys, after: "", keeping: 1000).keys == sorted)
        #expect(gathered(Self.keys, after: "\u{10FFFF}", keeping: 1000).keys.isEmpty)
    }

    @Test func beyondItsLimitTheSmallestAreKeptAndTheRestDropped() {
        var generator = SystemRandomNumberGenerator()
        let many = (0..<500).map { _ in
            String(
                (0..<Int.random(in: 1...6, using: &generator)).map { _ in "aAé0~日".randomElement(using: &generator)! })
        }
        let distinct = Array(Set(many))
        let sorted = distinct.sorted(by: StoreKey.bytesPrecede)
        for keeping in [1, 7, 64, distinct.count - 1] {
            let result = gathered(distinct.shuffled(using: &generator), after: sorted[3], keeping: keeping)
            #expect(result.keys == Array(sorted[4..<min(4 + keeping, sorted.count)]), "keeping \(keeping)")
            #expect(result.truncated == (sorted.count - 4 > keeping), "keeping \(keeping)")
        }
    }
}
