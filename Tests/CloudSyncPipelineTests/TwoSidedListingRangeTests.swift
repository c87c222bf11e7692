import CloudSync
import CloudSyncTesting
import Testing

@testable import CloudSyncJobs
@testable import CloudSyncPipeline

/// A two-sided listing limited to a key range (a sharded `check`'s): over ranges cut anywhere, the ranges' pages
/// together are the whole listing's, each key once, whether a side lists in key order or is sorted through a spill.
@Suite struct TwoSidedListingRangeTests {
    private func entries(_ listing: TwoSidedListing) async throws -> [String] {
        var all: [String] = []
        while true {
            let page = try await listing.nextPage()
            if page.isEmpty { return all }
            all += page.map { "\($0.key)|\($0.onSource ? "s" : "")\($0.onDestination ? "d" : "")" }
        }
    }

    @Test(arguments: [3, 4, 5] as [UInt64])
    func rangesTogetherListWhatTheWholeListingDoes(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        // Memory providers list in no particular order, so both sides go through a sorted spill.
        let from = MemoryProvider(id: "from")
        let to = MemoryProvider(id: "to")
        let keys = (0..<400).map { _ in
            String(
                (0..<Int.random(in: 1...4, using: &random)).map { _ in
                    ["a", "b", "é", "日", "Z", "0"].randomElement(using: &random)!
                }.joined())
        }
        let unique = Array(Set(keys))
        _ = try await from.set(unique.filter { _ in Bool.random(using: &random) }.map { KeyValue($0, "v") })
        _ = try await to.set(unique.filter { _ in Bool.random(using: &random) }.map { KeyValue($0, "v") })
        let store = try CloudStore(providers: [from, to])
        let providers: [String: any Provider] = ["from": from, "to": to]
        let whole = TwoSidedListing(from: "from", to: "to", store: store, pageSize: 7, keys: nil)
        try await whole.prepare(providers: providers)
        let expected = try await entries(whole)
        let sorted = unique.sorted { StoreKey.bytesPrecede($0, $1) }
        let boundaries = Array(sorted.shuffled(using: &random).prefix(6)).sorted { StoreKey.bytesPrecede($0, $1) }
        var joined: [String] = []
        for range in KeyRange.cut(at: boundaries) {
            let part = TwoSidedListing(from: "from", to: "to", store: store, pageSize: 7, keys: nil, range: range)
            try await part.prepare(providers: providers)
            joined += try await entries(part)
        }
        #expect(joined == expected)
        store.close()
    }
}
