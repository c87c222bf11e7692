import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

/// A provider whose calls of one kind wait at a gate until the test opens it, ignoring cancellation as a stuck
/// socket would; it then answers with `outcome`.
final class GatedProvider: ForwardingProvider {
    enum Call: Sendable { case get, set }

    let wrapped: any Provider
    private let gated: Call
    private let state = Mutex<(closed: Bool, waiting: Int, waiters: [CheckedContinuation<Void, Never>])>(
        (true, 0, []))
    private let failure: CloudSyncError?

    /// Gates `gating` calls; with `once`, only the first of them (later ones pass at once, as a provider that
    /// recovered would answer).
    init(_ wrapped: any Provider, gating: Call, once: Bool = false, failing failure: CloudSyncError? = nil) {
        self.wrapped = wrapped
        gated = gating
        self.once = once
        self.failure = failure
    }

    private let once: Bool

    /// How many calls wait at the gate.
    var waiting: Int { state.withLock { $0.waiting } }

    /// Makes later calls wait again.
    func shut() { state.withLock { $0.closed = true } }

    /// Lets every waiting call and every later one through.
    func open() {
        let waiters = state.withLock { state in
            state.closed = false
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func pass() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { state -> Bool in
                guard state.closed, !(once && state.waiting > 0) else { return true }
                state.waiting += 1
                state.waiters.append(continuation)
                return false
            }
            if go { continuation.resume() }
        }
    }

    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        if gated == .get { await pass() }
        return try await wrapped.get(keys)
    }

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        if gated == .set { await pass() }
        if let failure { throw failure }
        return try await wrapped.set(items)
    }
}

/// Reads values written as `enc:<value>`; anything else is undecodable.
struct PrefixCodec: ValueCodec {
    struct NotEncoded: Error {}
    func encode(_ value: String, key: String) throws -> String { "enc:" + value }
    func decode(_ stored: String, key: String) throws -> String {
        guard stored.hasPrefix("enc:") else { throw NotEncoded() }
        return String(stored.dropFirst(4))
    }
    func isCurrent(_ stored: String) -> Bool { stored.hasPrefix("enc:") }
}

/// One test per way the store used to bring back old or removed data (issue 13); each failed before the fix.
@Suite struct NeverOlderScenarioTests {
    @Test func clearThenFlushDoesNotBringKeysBack() async throws {
        let clock = ManualClock()
        let provider = makeProvider("p")
        let store = try makeStore([provider]) {
            $0.outbox = try! makeOutbox()
            $0.clock = clock
        }
        try await store.set("v1", forKey: "k")
        provider.fail(.set, with: offline)
        #expect(try await store.set("old", forKey: "k").queued == ["p"])
        _ = try await store.clear()
        provider.fail(.set, with: offline, times: 0)
        clock.advance(by: .seconds(3600))
        _ = try await store.flushOutbox()
        #expect(try await store.get("k") == nil)
        #expect(try await raw(provider, "k") == nil)
    }

    @Test func aNewerFailoverWriteElsewhereSupersedesAQueuedOne() async throws {
        let clock = ManualClock()
        let first = makeProvider("first")
        let second = makeProvider("second")
        let store = try makeStore([first, second]) {
            $0.outbox = try! makeOutbox()
            $0.availabilityLifetime = .zero
            $0.clock = clock
        }
        first.fail(.set, with: offline)
        #expect(try await store.set("old", forKey: "k").queued == ["first"])
        first.isAvailableNow = false
        #expect(try await store.set("new", forKey: "k").stored == ["second"])
        first.isAvailableNow = true
        first.fail(.set, with: offline, times: 0)
        clock.advance(by: .seconds(3600))
        _ = try await store.flushOutbox()
        #expect(try await store.get("k") == "new")
        #expect(try await raw(first, "k") == nil)
    }

    @Test func aMirrorRemoveSupersedesAQueuedSetOnAnUnavailableProvider() async throws {
        let clock = ManualClock()
        let first = makeProvider("first")
        let second = makeProvider("second")
        let store = try makeStore([first, second]) {
            $0.writeMode = .mirror
            $0.outbox = try! makeOutbox()
            $0.availabilityLifetime = .zero
            $0.clock = clock
        }
        second.fail(.set, with: offline)
        #expect(try await store.set("v", forKey: "k").queued == ["second"])
        second.isAvailableNow = false
        _ = try await store.remove("k")
        second.isAvailableNow = true
        second.fail(.set, with: offline, times: 0)
        clock.advance(by: .seconds(3600))
        _ = try await store.flushOutbox()
        #expect(try await store.get("k") == nil)
        #expect(try await raw(second, "k") == nil)
    }

    @Test func aReadRepairNeverOverwritesARemoveThatLandedDuringTheRead() async throws {
        let first = makeProvider("first")
        let slow = GatedProvider(makeProvider("second"), gating: .get)
        _ = try await first.set([KeyValue("k", #"{"t":1}"#)])
        let store = try makeStore([first, slow]) {
            $0.writeMode = .mirror
            $0.resolver = .timestamp(field: "t")
        }
        let read = Task { try await store.get("k") }
        try await waitUntil { slow.waiting == 1 }
        let remove = Task { try await store.remove("k") }
        // The remove waits for the read's key: it cannot land between the read and its repair.
        try await Task.sleep(for: .milliseconds(50))
        slow.open()
        _ = try await read.value
        _ = try await remove.value
        #expect(try await raw(first, "k") == nil)
        #expect(try await raw(slow, "k") == nil)
        #expect(try await store.get("k") == nil)
    }

    @Test func aReadRepairNeverUsesACopyQueuedWorkWillReplace() async throws {
        let clock = ManualClock()
        let first = makeProvider("first")
        let second = makeProvider("second")
        let store = try makeStore([first, second]) {
            $0.writeMode = .mirror
            $0.resolver = .timestamp(field: "t")
            $0.outbox = try! makeOutbox()
            $0.clock = clock
        }
        try await store.set(#"{"t":1}"#, forKey: "k")
        second.fail(.remove, with: offline)
        #expect(try await store.remove("k").queued == ["second"])
        // The old copy on `second` is what the queued remove replaces: it is neither returned nor repaired onto
        // `first`.
        #expect(try await store.get("k") == nil)
        second.fail(.remove, with: offline, times: 0)
        clock.advance(by: .seconds(3600))
        #expect(try await store.flushOutbox().drained == 1)
        #expect(try await raw(first, "k") == nil)
        #expect(try await raw(second, "k") == nil)
    }

    @Test func aWriteInFlightDuringAnAccountSwitchIsNeverQueuedForTheNewAccount() async throws {
        let account = makeProvider("cloud", ProviderCapabilities(emitsAccountEvents: true))
        let gate = GatedProvider(account, gating: .set, failing: offline)
        let drops = DropLog()
        let store = try makeStore([gate]) { $0.outbox = try! makeOutbox(drops: drops) }
        let write = Task { try await store.set("previous user's", forKey: "k") }
        try await waitUntil { gate.waiting == 1 }
        account.emitAccountEvent(identityChanged: true)
        try await waitUntil { account.clearCachesCalls == 1 }
        gate.open()
        await #expect(throws: CloudSyncError.self) { try await write.value }
        #expect(store.pendingWrites().isEmpty)
    }

    @Test func aFlushInFlightDuringAnAccountSwitchDoesNotCountTheEntryDelivered() async throws {
        let clock = ManualClock()
        let account = makeProvider("cloud", ProviderCapabilities(emitsAccountEvents: true))
        let gate = GatedProvider(account, gating: .set)
        gate.open()
        let drops = DropLog()
        let store = try makeStore([gate]) {
            $0.outbox = try! makeOutbox(drops: drops)
            $0.clock = clock
        }
        account.fail(.set, with: offline, times: 1)
        #expect(try await store.set("v", forKey: "k").queued == ["cloud"])
        clock.advance(by: .seconds(3600))
        gate.shut()
        let flush = Task { try await store.flushOutbox() }
        try await waitUntil { gate.waiting == 1 }
        account.emitAccountEvent(identityChanged: true)
        try await waitUntil { store.pendingWrites().isEmpty }
        gate.open()
        let result = try await flush.value
        #expect(result.drained == 0)
        #expect(drops.reasons == [.accountChanged])
    }

    @Test func anIdentityChangeClearsAttachedProvidersCachesToo() async throws {
        let account = makeProvider("cloud", ProviderCapabilities(emitsAccountEvents: true))
        let archive = makeProvider("archive")
        let store = try CloudStore(providers: [account], attached: [archive])
        let heard = EventInbox<AccountEvent>()
        _ = store.onAccountChange { heard.append($0) }
        account.emitAccountEvent(identityChanged: true)
        // Listeners hear of the change only once every cache has been cleared.
        await heard.wait(for: 1)
        #expect(account.clearCachesCalls == 1)
        #expect(archive.clearCachesCalls == 1)
        store.close()
    }

    @Test func growingPastATierLeavesNoSmallerStaleCopy() async throws {
        let small = makeProvider("kv", ProviderCapabilities(tier: .keyValue))
        let large = makeProvider("files")
        let store = try makeStore([small, large]) { $0.tiering = .thresholds(kvMaxBytes: 10, recordMaxBytes: 100) }
        try await store.set("tiny", forKey: "k")
        let big = String(repeating: "x", count: 70)
        #expect(try await store.set(big, forKey: "k").stored == ["files"])
        #expect(try await raw(small, "k") == nil)
        #expect(try await store.get("k") == big)
    }

    @Test func aFailoverRemoveOfATieredValueLeavesItUnreadable() async throws {
        let small = makeProvider("kv", ProviderCapabilities(tier: .keyValue))
        let large = makeProvider("files")
        let store = try makeStore([small, large]) { $0.tiering = .thresholds(kvMaxBytes: 10, recordMaxBytes: 100) }
        try await store.set(String(repeating: "x", count: 70), forKey: "k")
        try await store.remove("k")
        #expect(try await store.get("k") == nil)
        #expect(try await raw(large, "k") == nil)
    }

    @Test func anUndecodableCopyIsSkippedAndReportedAndTheReadFallsThrough() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("k", "written without the codec")])
        _ = try await second.set([KeyValue("k", "enc:v")])
        let errors = ErrorLog()
        let store = try makeStore([first, second]) {
            $0.codec = PrefixCodec()
            $0.onError = errors.handler
        }
        #expect(try await store.get("k") == "v")
        #expect(errors.all.map(\.code) == [.decode])
        // A key whose only copy is undecodable reads as nil in a multiGet instead of failing the others.
        _ = try await second.set([KeyValue("only", "garbage")])
        #expect(try await store.multiGet(["only", "k"]) == [nil, "v"])
    }

    @Test func aWriteThatTimedOutCannotLandAfterANewerOne() async throws {
        let clock = ManualClock()
        let backing = makeProvider("p")
        let stuck = GatedProvider(backing, gating: .set, once: true)
        let store = try makeStore([stuck]) {
            $0.timeout = .seconds(1)
            $0.clock = clock
        }
        let old = Task { try await store.set("old", forKey: "k") }
        try await waitUntil { stuck.waiting == 1 }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(1))
        await #expect(throws: CloudSyncError.self) { try await old.value }
        // The newer write waits for the abandoned call (bounded by a second deadline) instead of racing past it.
        let new = Task { try await store.set("new", forKey: "k") }
        // Either it waits (its second deadline armed on the clock) or, as before the fix, it has already landed.
        try await waitUntil { clock.sleeperCount >= 1 || backing.calls(.set) >= 1 }
        stuck.open()
        _ = try await new.value
        try await waitUntil { backing.calls(.set) == 2 }
        #expect(try await raw(backing, "k") == "new")
    }

    /// A write stuck past the second deadline still cannot land after a newer one.
    ///
    /// The issue's case: with a 5 s timeout, `set v1` hangs and is queued; `set v2` waits one more timeout and was
    /// then stored; then the stuck call returned and the provider held v1. The newer write now waits in the outbox
    /// until the older call has returned, and is delivered after it.
    @Test func aWriteStuckPastTheSecondDeadlineStillCannotLandAfterANewerOne() async throws {
        let clock = ManualClock()
        let backing = makeProvider("p")
        let stuck = GatedProvider(backing, gating: .set, once: true)
        let store = try makeStore([stuck]) {
            $0.timeout = .seconds(5)
            $0.clock = clock
            $0.outbox = try! makeOutbox()
        }
        let old = Task { try await store.set("v1", forKey: "k") }
        try await waitUntil { stuck.waiting == 1 }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        #expect(try await old.value.queued == ["p"])
        let new = Task { try await store.set("v2", forKey: "k") }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        let receipt = try await new.value
        #expect(receipt.stored == [] && receipt.queued == ["p"], "v2 went out while v1 could still land")
        #expect(store.pendingWrites().map(\.encodedValue) == ["v2"])
        #expect(store.pendingWrites().first?.lastErrorCode == "ERR_TIMEOUT")
        // A flush while v1 still runs waits for it as a write does, then leaves v2 waiting, without an attempt.
        clock.advance(by: .seconds(3600))
        let flush = Task { try await store.flushOutbox() }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        #expect(try await flush.value.drained == 0)
        #expect(store.pendingWrites().first?.attempts == 1)
        #expect(backing.calls(.set) == 0)
        stuck.open()
        try await waitUntil { backing.calls(.set) == 1 }
        try await waitUntil(asking: { try await raw(backing, "k") == "v1" })
        clock.advance(by: .seconds(3600))
        try await waitUntil(asking: { try await store.flushOutbox().drained == 1 })
        #expect(try await raw(backing, "k") == "v2")
        #expect(store.pendingWrites().isEmpty)
    }

    /// A reconcile (as a sync job's page) holds its repair back too while an earlier write to that provider may land:
    /// it sent the repair, the stuck write then landed over it, and the reconcile had counted the key repaired.
    @Test func aReconcileNeverSendsARepairAStuckWriteCouldOverwrite() async throws {
        let clock = ManualClock()
        let first = makeProvider("first")
        let backing = makeProvider("second")
        let second = GatedProvider(backing, gating: .set, once: true)
        let store = try makeStore([first, second]) {
            $0.writeMode = .mirror
            $0.timeout = .seconds(5)
            $0.clock = clock
        }
        let old = Task { try await store.set("v1", forKey: "k") }
        try await waitUntil { second.waiting == 1 }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        #expect(try await old.value.stored == ["first"])
        // Another device wrote v2 where the first provider keeps it; a reconcile copies it to the second.
        _ = try await first.set([KeyValue("k", "v2")])
        let reconcile = Task { try await store.maintenance.reconcile(["k"]) }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(5))
        let result = try await reconcile.value
        #expect(result.repaired == 0 && result.failed.map(\.key) == ["k"], "\(result)")
        #expect(result.failed.first?.error.message.contains("may still land") == true)
        #expect(backing.calls(.set) == 0)
        second.open()
        try await waitUntil(asking: { try await raw(backing, "k") == "v1" })
        // Once the stuck write has returned, the next reconcile repairs the key for good.
        try await waitUntil(asking: { try await store.maintenance.reconcile(["k"]).repaired == 1 })
        #expect(try await raw(backing, "k") == "v2")
    }

    @Test func maxAttemptsOfOneMeansTheFailedAttemptWasTheOnlyOne() async throws {
        let provider = makeProvider("p")
        let drops = DropLog()
        let store = try makeStore([provider]) {
            $0.outbox = try! makeOutbox(Outbox.Limits(maxAttempts: 1), drops: drops)
        }
        provider.fail(.set, with: offline)
        await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "k") }
        _ = try await store.flushOutbox()
        #expect(provider.calls(.set) == 1)
        #expect(drops.reasons == [.tooManyAttempts])
    }

    @Test func aWriteWhoseEveryProbeHungIsQueuedNotRefused() async throws {
        let clock = ManualClock()
        let provider = makeProvider("p")
        provider.hang(.isAvailable)
        let store = try makeStore([provider]) {
            $0.timeout = .seconds(1)
            $0.clock = clock
            $0.outbox = try! makeOutbox()
        }
        let write = Task { try await store.set("v", forKey: "k") }
        try await waitUntil { provider.isHanging(.isAvailable) }
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(1))
        #expect(try await write.value.queued == ["p"])
    }
}
