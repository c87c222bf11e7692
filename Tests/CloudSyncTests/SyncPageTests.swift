import CloudSync
import CloudSyncTesting
import Testing

/// The store's per-page sync decisions, against baselines written by hand.
@Suite struct SyncPageTests {
    private func fingerprint(_ digests: [String: String]) -> SyncFingerprint {
        SyncFingerprint(digests.mapValues { SyncFingerprint.digest(of: $0) })
    }

    @Test func aFingerprintRoundTripsThroughItsStoredForm() {
        let print = fingerprint(["a": "one", "b.2": "two"])
        #expect(SyncFingerprint(text: print.text) == print)
        #expect(SyncFingerprint.digest(of: "x").count == 32)
    }

    /// Snapshots written by earlier versions hold these digests: BLAKE2b of 16 bytes in lowercase hexadecimal, as
    /// Python's hashlib computes it (`blake2b(b"x", digest_size=16).hexdigest()`).
    @Test func digestsAreBLAKE2bInLowercaseHexadecimal() {
        #expect(SyncFingerprint.digest(of: "x") == "442a44457137672b3218c1007dc8f76a")
        #expect(SyncFingerprint.digest(of: "héllo") == "249a5c7589499a8866064c0d58459744")
    }

    @Test func aDeletionIsHeldBackWhileAProviderThatHeldTheKeyIsUnreachable() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "v"), KeyValue("gone", "v")])
        let store = try CloudStore(providers: [a, ProbeProvider()])
        let items = [
            SyncItem(key: "k", baseline: fingerprint(["a": "v", "probe": "v"])),
            SyncItem(key: "gone", baseline: fingerprint(["a": "v"])),
        ]
        let removed = try await store.maintenance.removeUnchanged(items, among: ["a", "probe"])
        #expect(removed.heldBack == 1)
        #expect(removed.removed == ["gone"])
        #expect(try await a.get(["k", "gone"]).map { try $0.get() } == ["v", nil])
    }

    @Test func aKeyChangedSinceItWasFoundDeletedIsNotRemoved() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "edited")])
        let b = MemoryProvider(id: "b")
        let store = try CloudStore(providers: [a, b])
        let removed = try await store.maintenance.removeUnchanged(
            [SyncItem(key: "k", baseline: fingerprint(["a": "v", "b": "v"]))], among: ["a", "b"])
        #expect(removed.changedSince == 1 && removed.removed.isEmpty)
        #expect(try await a.get(["k"]).map { try $0.get() } == ["edited"])
    }

    @Test func onlySnapshotRowsThatChangeAreReturned() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("same", "v"), KeyValue("new", "n")])
        let b = MemoryProvider(id: "b", items: [KeyValue("same", "v")])
        let store = try CloudStore(providers: [a, b])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "new", baseline: nil), SyncItem(key: "same", baseline: fingerprint(["a": "v", "b": "v"]))],
            among: ["a", "b"])
        #expect(result.snapshot.map(\.key) == ["new"])
        #expect(result.snapshot.first?.fingerprint == fingerprint(["a": "n", "b": "n"]))
        #expect(result.inSync == 1 && result.repaired == 1)
    }
}
