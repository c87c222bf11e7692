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

    /// A key no provider changed since the last sync still goes to the store's resolver, which may answer a value
    /// none of them holds (a resolver changed since, or one that rewrites): every copy gets it, and the row follows.
    @Test func anUnchangedKeyStillGoesThroughTheStoresResolver() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "v"), KeyValue("left", "w")])
        let b = MemoryProvider(id: "b", items: [KeyValue("k", "v"), KeyValue("left", "w")])
        var options = StoreOptions()
        options.resolver = .custom { candidates in
            candidates.first.flatMap { $0.value == "w" ? nil : $0.value.uppercased() }
        }
        let store = try CloudStore(providers: [a, b], options: options)
        let result = try await store.maintenance.syncPage(
            [
                SyncItem(key: "k", baseline: fingerprint(["a": "v", "b": "v"])),
                SyncItem(key: "left", baseline: fingerprint(["a": "w", "b": "w"])),
            ], among: ["a", "b"])
        #expect(result.repaired == 1 && result.inSync == 1)
        #expect(try await a.get(["k", "left"]).map { try $0.get() } == ["V", "w"])
        #expect(try await b.get(["k", "left"]).map { try $0.get() } == ["V", "w"])
        #expect(result.snapshot.map(\.key) == ["k"])
        #expect(result.snapshot.first?.fingerprint == fingerprint(["a": "V", "b": "V"]))
    }

    /// A key no provider changed whose copies no longer decode (the codec's key was replaced since) is a failure
    /// each sync reports, never a key in sync.
    @Test func anUnchangedKeyThatNoLongerDecodesIsAFailure() async throws {
        struct Undecodable: ValueCodec {
            func encode(_ value: String, key: String) throws -> String { value }
            func decode(_ stored: String, key: String) throws -> String {
                throw CloudSyncError(.decode, "not this codec's")
            }
        }
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "v")])
        let b = MemoryProvider(id: "b", items: [KeyValue("k", "v")])
        var options = StoreOptions()
        options.codec = Undecodable()
        let store = try CloudStore(providers: [a, b], options: options)
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: fingerprint(["a": "v", "b": "v"]))], among: ["a", "b"])
        #expect(result.failed.map(\.key) == ["k"])
        #expect(result.failed.first?.error.code == .decode)
        #expect(result.inSync == 0 && result.snapshot.isEmpty)
    }

    /// A row's digests are found by exact provider id: one id the prefix of another, or holding "=", is not
    /// mistaken for it, so a copy changed since on one of them is seen and its row rewritten.
    @Test(arguments: [("a", "ab"), ("ab", "a"), ("a", "a=b"), ("a=b", "b")])
    func providerIDsThatOverlapAreToldApart(changed: String, other: String) async throws {
        let first = MemoryProvider(id: changed, items: [KeyValue("k", "v")])
        let second = MemoryProvider(id: other, items: [KeyValue("k", "v")])
        let store = try CloudStore(providers: [first, second])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: fingerprint([changed: "old", other: "v"]))], among: [changed, other])
        #expect(result.inSync == 1 && result.repaired == 0)
        #expect(result.snapshot.first?.fingerprint == fingerprint([changed: "v", other: "v"]))
        let unchanged = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: fingerprint([changed: "v", other: "v"]))], among: [changed, other])
        #expect(unchanged.inSync == 1 && unchanged.snapshot.isEmpty)
    }

    /// A key unchanged on the providers of this page but recorded on one more (left out of this sync) is not in
    /// sync by digests alone: its row keeps that provider's digest.
    @Test func aRowNamingAProviderLeftOutKeepsItsDigest() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "v")])
        let b = MemoryProvider(id: "b", items: [KeyValue("k", "v")])
        let store = try CloudStore(providers: [a, b])
        let baseline = fingerprint(["a": "v", "b": "v", "c": "old"])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: baseline)], among: ["a", "b"], unknown: ["c"])
        #expect(result.inSync == 1 && result.repaired == 0 && result.snapshot.isEmpty)
        #expect(SyncFingerprint(text: baseline.text).digests == baseline.digests)
    }
}
