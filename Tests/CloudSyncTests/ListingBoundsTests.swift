import CloudSync
import CloudSyncTesting
import Testing

/// A listing ends whatever a provider answers: cursors that come round again, or pages longer than asked for, fail
/// with a clear error instead of looping or growing without bound.
@Suite struct ListingBoundsTests {
    /// Lists through `pages` answers in turn, then ends; counts the pages asked for.
    struct ScriptedListing: ForwardingProvider {
        let wrapped: any Provider
        let pages: @Sendable (Int, String?) -> KeyPage
        let asked = Counter()

        func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
            let call = asked.next()
            return call > 200 ? KeyPage(keys: [], nextCursor: nil) : pages(call, cursor)
        }
    }

    @Test func aCursorThatComesRoundAgainEndsTheListing() async throws {
        // a -> b -> a -> b ...: never the same cursor twice in a row, yet it would never end.
        let listing = ScriptedListing(wrapped: makeProvider("cycling")) { call, _ in
            KeyPage(keys: ["k\(call)"], nextCursor: call.isMultiple(of: 2) ? "a" : "b")
        }
        let store = try makeStore([listing])
        let listingError = try #require(try await store.allKeys().unlisted["cycling"])
        #expect(listingError.code == .provider)
        #expect(listingError.message.contains("cursor"), "\(listingError.message)")
        #expect(listing.asked.value <= 3)
    }

    @Test func aPageLongerThanAskedForEndsTheListing() async throws {
        let listing = ScriptedListing(wrapped: makeProvider("flooding")) { call, _ in
            KeyPage(keys: (0..<5000).map { "k\(call)-\($0)" }, nextCursor: "c\(call)")
        }
        let store = try makeStore([listing])
        let listingError = try #require(try await store.allKeys().unlisted["flooding"])
        #expect(listingError.message.contains("5000 keys"), "\(listingError.message)")
        #expect(listing.asked.value == 1)
    }
}
