import CloudSync
import CloudSyncTesting
import Testing

/// A key is its UTF-8 bytes: equality, hashing and order agree with a plain comparison of byte arrays, and the
/// store keeps canonically equivalent spellings apart everywhere it collects keys.
@Suite struct StoreKeyTests {
    @Test func canonicallyEquivalentSpellingsAreDifferentKeys() {
        // Swift's own equality merges them: the reason the type exists.
        #expect(Set(KeyTwins.canonical).count == 2)
        #expect(KeyTwins.canonical.keySet().count == 5)
        #expect(StoreKey("caf\u{E9}") != StoreKey("cafe\u{301}"))
        #expect(StoreKey("caf\u{E9}") == StoreKey("caf\u{E9}"))
        #expect(KeyTwins.canonical.sortedAsKeys() == ["A\u{30A}", "cafe\u{301}", "caf\u{E9}", "\u{C5}", "\u{212B}"])
    }

    /// Order, equality and hashing against an independent implementation: byte arrays compared lexicographically,
    /// over random strings drawn to include twins, case twins, prefixes and non-ASCII.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func agreesWithByteArrays(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let alphabet = ["a", "A", "e", "\u{301}", "\u{E9}", "\u{C5}", "\u{212B}", "\u{30A}", "/", "~", "\u{1F600}", ""]
        func draw() -> String {
            (0..<Int.random(in: 0..<5, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.joined()
        }
        for _ in 0..<2000 {
            let (a, b) = (draw(), draw())
            let (x, y) = (Array(a.utf8), Array(b.utf8))
            #expect((StoreKey(a) < StoreKey(b)) == x.lexicographicallyPrecedes(y), "\(x) < \(y)")
            #expect((StoreKey(a) == StoreKey(b)) == (x == y), "\(x) == \(y)")
            if x == y { #expect(StoreKey(a).hashValue == StoreKey(b).hashValue) }
            #expect(StoreKey.compareBytes(a, b).signum() == (x == y ? 0 : x.lexicographicallyPrecedes(y) ? -1 : 1))
        }
    }

    @Test func aMirrorWriteQueuesEveryTwinForTheProviderThatRefused() async throws {
        let local = makeProvider("local")
        let remote = makeProvider("remote")
        remote.fail(.set, with: offline)
        let clock = ManualClock()
        let store = try makeStore([local, remote]) { options in
            options.clock = clock
            options.writeMode = .mirror
            options.outbox = try? makeOutbox()
        }
        let items = KeyTwins.canonical.map { KeyValue($0, KeyTwins.value(for: $0)) }
        for result in try await store.multiSet(items) { #expect(try result.get().queued == ["remote"]) }
        #expect(store.pendingWrites().map(\.key).keySet() == KeyTwins.canonical.keySet())
        remote.fail(.set, with: offline, times: 0)
        clock.advance(by: .seconds(60))
        #expect(try await store.flushOutbox().drained == 5)
        for key in KeyTwins.canonical { #expect(try await raw(remote, key) == KeyTwins.value(for: key)) }
        #expect(try await store.allItems().count == 5)
    }

    @Test func readsResolveAndRepairEachTwinOnItsOwn() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        for key in KeyTwins.canonical {
            _ = try await first.set([KeyValue(key, KeyTwins.value(for: key))])
        }
        let store = try makeStore([first, second]) { options in
            options.resolver = .custom { $0.first?.value }
            options.repairOnRead = true
        }
        let values = try await store.multiGet(KeyTwins.canonical)
        #expect(values == KeyTwins.canonical.map { KeyTwins.value(for: $0) })
        for key in KeyTwins.canonical { #expect(try await raw(second, key) == KeyTwins.value(for: key)) }
        let result = try await StoreMaintenance(store).reconcile(KeyTwins.canonical)
        #expect(result.keys == 5)
        #expect(result.inSync == 5)
    }
}
