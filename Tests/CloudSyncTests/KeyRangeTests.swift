import CloudSync
import CloudSyncTesting
import Testing

/// Key ranges, the parts a sharded job is split into: bounds by bytes (not by Swift's string order), ranges that
/// cut one listing into disjoint parts covering every key, and a listing in key order that stops at the end.
@Suite struct KeyRangeTests {
    private static let alphabet = Array("aZ0./ é日🌍\u{0}\u{301}e")

    @Test func boundsCompareBytesNotCanonicalEquivalence() {
        // "é" as one scalar and as e + combining accent are equal Strings but two keys.
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        let range = KeyRange(after: decomposed, through: composed)
        #expect(range.contains(composed))
        #expect(!range.contains(decomposed), "the lower bound itself is outside")
        #expect(
            KeyRange(after: nil, through: "a\u{0}").contains("a")
                && !KeyRange(after: nil, through: "a").contains("a\u{0}"))
    }

    @Test(arguments: [1, 2, 3, 4, 5])
    func rangesCutFromBoundariesPartitionEveryListing(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let keys = Set(
            (0..<300).map { _ in
                String(
                    (0..<Int.random(in: 1...4, using: &random)).map { _ in Self.alphabet.randomElement(using: &random)!
                    })
            }
        ).sorted { StoreKey.bytesPrecede($0, $1) }
        let boundaries = Array(keys.shuffled(using: &random).prefix(5)).sorted { StoreKey.bytesPrecede($0, $1) }
        let ranges = KeyRange.cut(at: boundaries)
        #expect(ranges.count == boundaries.count + 1)
        for key in keys {
            #expect(ranges.filter { $0.contains(key) }.count == 1, "\(key.unicodeScalars.map(\.value)) in one range")
        }
        // Paging through the sorted listing, a range's keys are the pages' filtered keys, and it stops past its end.
        for range in ranges {
            var found: [String] = []
            var stopped = false
            for start in stride(from: 0, to: keys.count, by: 37) where !stopped {
                let (page, pastEnd) = range.keys(of: Array(keys[start..<min(start + 37, keys.count)]), ordered: true)
                found += page
                stopped = pastEnd
            }
            #expect(found == keys.filter(range.contains))
            #expect(stopped == (range.through != nil && range.through != keys.last))
        }
    }

    @Test func aListingStartsAfterTheRangeStartOnlyWhereTheCursorIsAKey() {
        let range = KeyRange(after: "m", through: nil)
        #expect(range.firstCursor(listing: ProviderCapabilities(listsInKeyOrder: true, cursorIsKey: true)) == "m")
        #expect(range.firstCursor(listing: ProviderCapabilities(listsInKeyOrder: true)) == nil)
        #expect(range.firstCursor(listing: ProviderCapabilities()) == nil)
        // Unordered, the whole page is filtered and the listing never stops early.
        let (keys, pastEnd) = KeyRange(after: "b", through: "d").keys(of: ["z", "c", "a", "d"], ordered: false)
        #expect(keys == ["c", "d"] && !pastEnd)
    }
}
