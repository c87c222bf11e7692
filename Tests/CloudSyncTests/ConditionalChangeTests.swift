import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

/// Another writer (a phone using the library, another runner) that lands its value just before the store's change of
/// the same key arrives: between the store's read and its write or removal, where no lock of this process reaches.
final class InterposingWriter: ForwardingProvider {
    let wrapped: any Provider
    /// The value the other writer lands.
    let value: String
    private let landed = Mutex<[String]>([])

    init(_ wrapped: any Provider, landing value: String = "written by another device") {
        self.wrapped = wrapped
        self.value = value
    }

    /// The wrapped provider's, conditions included: this wrapper passes them on.
    var capabilities: ProviderCapabilities { wrapped.capabilities }

    /// The keys the other writer landed a value under, in order.
    var keys: [String] { landed.withLock { $0 } }

    private func interpose(_ keys: [String]) async throws {
        _ = try await wrapped.set(keys.map { KeyValue($0, value) })
        landed.withLock { $0 += keys }
    }

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try await interpose(items.map(\.key))
        return try await wrapped.set(items)
    }

    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await interpose(keys)
        return try await wrapped.remove(keys)
    }

    func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try await wrapped.getVersioned(keys)
    }

    func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws -> [Result<String?, CloudSyncError>] {
        try await interpose(items.map(\.key))
        return try await wrapped.set(items, conditions: conditions)
    }

    func remove(_ keys: [String], conditions: [WriteCondition?]) async throws -> [Result<Void, CloudSyncError>] {
        try await interpose(keys)
        return try await wrapped.remove(keys, conditions: conditions)
    }
}

/// What the store changes on a provider after reading it changes only what it read: a value another writer landed in
/// between stays, and the key is reported changed since read rather than failed or queued.
@Suite struct ConditionalChangeTests {
    private let other = "written by another device"

    @Test func aMoveRemovesNothingAnotherWriterLandedAfterTheCheck() async throws {
        let source = InterposingWriter(MemoryProvider(id: "source", items: [KeyValue("a", "1"), KeyValue("b", "2")]))
        let store = try makeStore([MemoryProvider(id: "destination"), source])
        let landed = [
            LandedCopy(key: "a", sourceDigest: SyncFingerprint.digest(of: "1")),
            LandedCopy(key: "b", sourceDigest: SyncFingerprint.digest(of: "2")),
        ]
        let outcomes = try await store.removeUnchanged(landed, from: "source")
        #expect(outcomes == [.changed, .changed])
        #expect(source.keys == ["a", "b"], "the other writer landed both values in between")
        #expect(try await source.get(["a", "b"]).map { try $0.get() } == [other, other])
    }

    /// The same step on a provider that takes no conditions loses the other writer's values: the hole the conditions
    /// close, so the test above can fail.
    @Test func withoutConditionsTheOtherWritersValueIsLost() async throws {
        let plain = FaultInjectingProvider(
            MemoryProvider(id: "source", items: [KeyValue("a", "1")]),
            capabilities: ProviderCapabilities(listsInKeyOrder: true, conditionalWrites: false))
        let source = InterposingWriter(plain)
        let store = try makeStore([MemoryProvider(id: "destination"), source])
        let outcomes = try await store.removeUnchanged(
            [LandedCopy(key: "a", sourceDigest: SyncFingerprint.digest(of: "1"))], from: "source")
        #expect(outcomes == [.removed])
        #expect(try await source.get(["a"]).map { try $0.get() } == [nil])
    }

    @Test func aMirrorsRemovalAsListedKeepsWhatWasWrittenSinceTheListing() async throws {
        let memory = MemoryProvider(id: "to", items: [KeyValue("listed", "v"), KeyValue("unlisted", "w")])
        let store = try makeStore([memory])
        let listed = try await memory.listKeys(after: nil, limit: 10)
        // Rewritten after the listing, by someone else: the listed tag no longer matches.
        _ = try await memory.set([KeyValue("listed", "newer")])
        let outcomes = try await store.removeAsSeen(
            ["listed", "unlisted", "missing"], versions: [listed.version(at: 0), nil, nil], from: "to")
        #expect(outcomes == [.changed, .removed, .absent])
        #expect(try await memory.get(["listed", "unlisted"]).map { try $0.get() } == ["newer", nil])
    }

    @Test func aSyncDeletionLeavesAValueLandedBetweenItsReadAndItsRemoval() async throws {
        let a = MemoryProvider(id: "a")
        let b = InterposingWriter(MemoryProvider(id: "b", items: [KeyValue("k", "v")]))
        let store = try makeStore([a, b])
        // Deleted at a since the last sync, unchanged at b: the sync removes it from b, as it read it.
        let baseline = SyncFingerprint(["a": SyncFingerprint.digest(of: "v"), "b": SyncFingerprint.digest(of: "v")])
        let result = try await store.maintenance.removeUnchanged(
            [SyncItem(key: "k", baseline: baseline)], among: ["a", "b"])
        #expect(result.changedSinceRead == 1)
        #expect(result.removed.isEmpty && result.failed.isEmpty && result.queued == 0)
        #expect(try await b.get(["k"]).map { try $0.get() } == [other])
    }

    @Test func aReadRepairDoesNotOverwriteAValueLandedAfterItsRead() async throws {
        let fresh = MemoryProvider(id: "fresh", items: [KeyValue("k", #"{"updatedAt":2}"#)])
        let stale = InterposingWriter(
            MemoryProvider(id: "stale", items: [KeyValue("k", #"{"updatedAt":1}"#)]), landing: #"{"updatedAt":3}"#)
        let errors = ErrorLog()
        let store = try makeStore([fresh, stale]) {
            $0.resolver = Resolver.timestamp(field: "updatedAt")
            $0.onError = errors.handler
        }
        #expect(try await store.get("k") == #"{"updatedAt":2}"#)
        #expect(stale.keys == ["k"], "the repair was attempted")
        #expect(try await stale.get(["k"]).map { try $0.get() } == [#"{"updatedAt":3}"#])
        #expect(errors.all.isEmpty, "a repair that found a newer value is not an error: \(errors.all)")
        // The next read sees the newer value and repairs the other provider with it.
        #expect(try await store.get("k") == #"{"updatedAt":3}"#)
    }

    /// Many writers increment one counter with compare-and-swap (read the version, write on the condition that it is
    /// still that version, read again when refused): no increment is lost, whichever provider instance each uses.
    @Test func compareAndSwapLosesNoIncrementOnAMemoryProvider() async throws {
        let memory = MemoryProvider(id: "counter", items: [KeyValue("n", "0")])
        let total = try await ConditionalCounter.run(writers: (0..<6).map { _ in memory }, increments: 40)
        #expect(total == 240)
    }
}
