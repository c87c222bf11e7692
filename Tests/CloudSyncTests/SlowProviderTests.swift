import CloudSync
import CloudSyncTesting
import Testing

/// A slow provider holds up only its own part of a batch call: the other providers' work is done while it still
/// waits, so the call takes the slowest provider's time, not the sum.
@Suite struct SlowProviderTests {
    let clock = ManualClock()

    /// A slow provider (10 s of latency on the manual clock) listed first, a fast one second, both available.
    private func providers() async throws -> (slow: FaultInjectingProvider, fast: FaultInjectingProvider) {
        let slow = FaultInjectingProvider(
            id: "slow", capabilities: ProviderCapabilities(reportsQuota: true), clock: clock)
        let fast = FaultInjectingProvider(
            id: "fast", capabilities: ProviderCapabilities(batchLimit: 2, reportsQuota: true), totalBytes: 1000,
            clock: clock)
        _ = try await slow.set([KeyValue("only.slow", "s")])
        _ = try await fast.set([KeyValue("only.fast", "f")])
        slow.resetCounts()
        fast.resetCounts()
        return (slow, fast)
    }

    private func store(_ providers: [any Provider], mirror: Bool = false) async throws -> CloudStore {
        let store = try makeStore(providers) {
            $0.clock = clock
            $0.writeMode = mirror ? .mirror : .failover
        }
        _ = try await store.get("warm.up")  // the availability answers are memoised before the latency starts
        return store
    }

    @Test func aMirrorWriteReachesTheFastProviderWhileTheSlowOneStillWaits() async throws {
        let (slow, fast) = try await providers()
        let store = try await store([slow, fast], mirror: true)
        slow.setLatency(.seconds(10))
        let items = (0..<6).map { KeyValue("key.\($0)", "value \($0)") }
        let write = Task { try await store.multiSet(items) }
        // All three of the fast provider's batches went out while the slow provider's one call sleeps.
        try await waitUntil { fast.keysRequested(.set) == 6 && clock.sleeperCount == 1 }
        #expect(try await raw(fast, "key.5") == "value 5")
        clock.advance(by: .seconds(10))
        let receipts = try await write.value.map { try $0.get() }
        #expect(receipts.allSatisfy { Set($0.stored) == ["slow", "fast"] })
        slow.setLatency(nil)
        #expect(try await raw(slow, "key.5") == "value 5")
    }

    @Test func aMirrorRemoveReachesTheFastProviderWhileTheSlowOneStillWaits() async throws {
        let (slow, fast) = try await providers()
        let store = try await store([slow, fast], mirror: true)
        _ = try await store.multiSet([KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("c", "3")])
        slow.setLatency(.seconds(10))
        let remove = Task { try await store.multiRemove(["a", "b", "c"]) }
        try await waitUntil { fast.keysRequested(.remove) == 3 && clock.sleeperCount == 1 }
        clock.advance(by: .seconds(10))
        #expect(try await remove.value.allSatisfy { Set(try $0.get().stored) == ["slow", "fast"] })
    }

    @Test func listingEveryKeyAsksTheFastProviderWhileTheSlowOneStillWaits() async throws {
        let (slow, fast) = try await providers()
        let store = try await store([slow, fast])
        slow.setLatency(.seconds(10))
        let listing = Task { try await store.allKeys() }
        try await waitUntil { fast.calls(.list) == 1 && clock.sleeperCount == 1 }
        clock.advance(by: .seconds(10))
        #expect(try await listing.value.keys == ["only.fast", "only.slow"])
    }

    @Test func quotaAsksTheFastProviderWhileTheSlowOneStillWaitsAndKeepsProviderOrder() async throws {
        let (slow, fast) = try await providers()
        let store = try await store([slow, fast])
        slow.setLatency(.seconds(10))
        let quota = Task { try await store.quota() }
        try await waitUntil { fast.calls(.quota) == 1 && clock.sleeperCount == 1 }
        clock.advance(by: .seconds(10))
        let entries = try await quota.value
        #expect(entries.map(\.provider) == ["slow", "fast"])
        #expect(entries.last?.totalBytes == 1000)
    }
}
