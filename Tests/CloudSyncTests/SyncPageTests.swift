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

    /// A provider that answers unavailable when a page begins is left out of that page and named with its answer, so
    /// the caller knows the page was not compared everywhere (a sync that took such a run as complete would advance
    /// its feed cursors past keys that provider never got).
    @Test func aProviderUnavailableWhenAPageBeginsIsNamedAsLeftOut() async throws {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "new")])
        let store = try CloudStore(providers: [a, ProbeProvider()])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: nil)], among: ["a", "probe"])
        #expect(result.leftOut == ["probe": ProbeProvider().availabilityAnswer])
        #expect(result.repaired == 0 && result.inSync == 1)
        // One the caller already counts unknown is its own business, not news.
        let known = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: nil)], among: ["a", "probe"], unknown: ["probe"])
        #expect(known.leftOut == [:])
    }

    /// With every provider counted unknown by the caller, the error says so instead of calling them unavailable.
    @Test func noComparableProviderSaysWhyEachWasCountedOut() async throws {
        let store = try CloudStore(providers: [MemoryProvider(id: "a"), MemoryProvider(id: "b")])
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.maintenance.syncPage(
                [SyncItem(key: "k", baseline: nil)], among: ["a", "b"], unknown: ["a", "b"])
        }
        #expect(error?.code == .noProvider)
        #expect(error?.message.contains("a (left out by the caller: its keys are unknown to this sync)") == true)
        #expect(error?.message.contains("(available)") == false)
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

    // MARK: Listed version tags

    /// Two memory providers holding `items`, wrapped to count reads, in a store.
    private func countedPair(_ a: [KeyValue], _ b: [KeyValue], options: StoreOptions = StoreOptions()) throws -> (
        CloudStore, FaultInjectingProvider, FaultInjectingProvider
    ) {
        let a = FaultInjectingProvider(MemoryProvider(id: "a", items: a))
        let b = FaultInjectingProvider(MemoryProvider(id: "b", items: b))
        return (try CloudStore(providers: [a, b], options: options), a, b)
    }

    @Test func tagsRoundTripAndATagEqualToItsDigestIsKeptOnce() {
        let digest = SyncFingerprint.digest(of: "v")
        let print = SyncFingerprint(["a": digest, "b": digest], tags: ["a": "etag-1", "b": digest])
        #expect(print.tags == ["a": "etag-1", "b": digest])
        #expect(print.digests == ["a": digest, "b": digest])
        #expect(print.text.utf8.count(where: { $0 == UInt8(ascii: "=") }) == 4, "b's tag is not written out again")
        #expect(SyncFingerprint(text: print.text) == print)
        #expect(print.withTags([:]) == SyncFingerprint(["a": digest, "b": digest]))
        #expect(print.withTags([:]).tags.isEmpty)
        // A tag that cannot be kept is left out rather than mangled.
        for bad in ["", "x=y", "x\u{1F}y", "x\u{1E}y"] {
            #expect(!SyncFingerprint.canRecord(tag: bad))
            #expect(SyncFingerprint(["a": digest], tags: ["a": bad]).tags.isEmpty)
        }
    }

    /// The digests and the tags are looked up apart: a tag that happens to equal a digest (or the reverse) vouches
    /// for nothing.
    @Test func aTagIsNeverTakenForADigest() async throws {
        let (store, a, b) = try countedPair([KeyValue("k", "new")], [KeyValue("k", "new")])
        let newDigest = SyncFingerprint.digest(of: "new")
        // The row's digests are of "old"; its tags hold the digest of "new", as an S3 ETag might spell an MD5.
        let row = SyncFingerprint(
            ["a": SyncFingerprint.digest(of: "old"), "b": SyncFingerprint.digest(of: "old")],
            tags: ["a": "t-a", "b": "t-b"])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: row)], among: ["a", "b"],
            listedTags: ["a": [newDigest], "b": [newDigest]])
        #expect(a.keysRequested(.get) == 1 && b.keysRequested(.get) == 1, "tags that moved mean the copies are read")
        #expect(result.inSync == 1 && result.snapshot.count == 1)
        #expect(result.snapshot.first?.fingerprint?.digests == ["a": newDigest, "b": newDigest])
    }

    /// A key whose row records, for every provider, the tag its listing gives now is in sync without a read; one
    /// whose tag moved on any provider is read and decided.
    @Test func tagsThatStillMatchSpareTheReads() async throws {
        let (store, a, b) = try countedPair(
            [KeyValue("same", "v"), KeyValue("edited", "new")], [KeyValue("same", "v"), KeyValue("edited", "old")])
        let digest = { (value: String) in SyncFingerprint.digest(of: value) }
        let items = [
            SyncItem(
                key: "edited",
                baseline: SyncFingerprint(["a": digest("old"), "b": digest("old")], tags: ["a": "a1", "b": "b1"])),
            SyncItem(
                key: "same",
                baseline: SyncFingerprint(["a": digest("v"), "b": digest("v")], tags: ["a": "a2", "b": "b2"])
            ),
        ]
        let result = try await store.maintenance.syncPage(
            items, among: ["a", "b"], listedTags: ["a": ["a1-moved", "a2"], "b": ["b1", "b2"]])
        #expect(result.keys == 2 && result.inSync == 1 && result.repaired == 1)
        #expect(a.keysRequested(.get) == 1 && b.keysRequested(.get) == 1, "only the edited key is read")
        #expect(try await b.get(["edited"]).map { try $0.get() } == ["new"])
        // The written key's row records a's listed tag, which vouched for the value a sent, and the tag b's write
        // answered, which b's next listing gives: b's listed tag was of the copy before the write.
        #expect(result.snapshot.map(\.key) == ["edited"])
        let listing = try await b.listKeys(after: nil, limit: 10)
        let tagAtB = try #require(listing.keys.firstIndex(of: "edited").flatMap { listing.version(at: $0) })
        #expect(result.snapshot.first?.fingerprint?.tags == ["a": "a1-moved", "b": tagAtB])
    }

    /// Tags are recorded only for a key found with one value on every provider and nothing written, in a row naming
    /// no provider left out; never where a resolver declined to choose.
    @Test func tagsAreRecordedOnlyForKeysFoundInSync() async throws {
        var options = StoreOptions()
        options.resolver = .custom { candidates in Set(candidates.map(\.value)).count == 1 ? candidates[0].value : nil }
        let (store, _, _) = try countedPair(
            [KeyValue("agreed", "v"), KeyValue("new", "n"), KeyValue("split", "x"), KeyValue("untagged", "u")],
            [KeyValue("agreed", "v"), KeyValue("new", "n"), KeyValue("split", "y"), KeyValue("untagged", "u")],
            options: options)
        let digest = { (value: String) in SyncFingerprint.digest(of: value) }
        let items = [
            SyncItem(key: "agreed", baseline: SyncFingerprint(["a": digest("v"), "b": digest("v")])),
            SyncItem(key: "new", baseline: nil),
            SyncItem(key: "split", baseline: nil),
            SyncItem(key: "untagged", baseline: SyncFingerprint(["a": digest("u"), "b": digest("u")])),
        ]
        let result = try await store.maintenance.syncPage(
            items, among: ["a", "b"], listedTags: ["a": ["ta", "tn", "tx", nil], "b": ["ua", "un", "uy", "uu"]])
        let rows = Dictionary(
            uniqueKeysWithValues: result.snapshot.compactMap { row in row.fingerprint.map { (row.key, $0) } })
        #expect(rows["agreed"]?.tags == ["a": "ta", "b": "ua"])
        #expect(rows["new"]?.tags == ["a": "tn", "b": "un"])
        #expect(rows["split"]?.tags == [:], "the resolver declined: the copies differ")
        #expect(rows["untagged"] == nil, "a provider gave no tag: the row stays as it was")

        // A row that names a provider left out of this page gets no tags: that provider's copy was not looked at.
        let (other, _, _) = try countedPair([KeyValue("k", "v")], [KeyValue("k", "v")])
        let withC = SyncFingerprint(["a": digest("v"), "b": digest("v"), "c": digest("old")])
        let left = try await other.maintenance.syncPage(
            [SyncItem(key: "k", baseline: withC)], among: ["a", "b"], unknown: ["c"],
            listedTags: ["a": ["ta"], "b": ["tb"]])
        #expect(left.inSync == 1 && left.snapshot.isEmpty)
    }

    /// A provider whose tags are its values' digests (as SQLite's are) has the tag of a value the sync wrote recorded
    /// at once, beside the listed tags of the providers that already held it, and so does one whose write answers the
    /// version it stored (S3's ETag, CloudKit's change tag, the memory provider's); any other provider's new tag is
    /// unknown until its next listing, so the row records none.
    @Test(arguments: [(true, false), (false, true), (false, false)])
    func aWrittenValuesTagIsKnownWhenTagsAreDigestsOrWritesTellThem(tagsAreDigests: Bool, tellsVersions: Bool)
        async throws
    {
        let a = MemoryProvider(id: "a", items: [KeyValue("k", "v")])
        var capabilities = MemoryProvider(id: "b").capabilities
        capabilities.tagsAreValueDigests = tagsAreDigests
        capabilities.conditionalWrites = tellsVersions
        let memory = MemoryProvider(id: "b")
        let b = FaultInjectingProvider(memory, capabilities: capabilities)
        let store = try CloudStore(providers: [a, b])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: nil)], among: ["a", "b"], listedTags: ["a": ["ta"], "b": [nil]])
        #expect(result.repaired == 1)
        let digest = SyncFingerprint.digest(of: "v")
        #expect(result.snapshot.first?.fingerprint?.digests == ["a": digest, "b": digest])
        let listed = try #require(try await memory.listKeys(after: nil, limit: 1).version(at: 0))
        let expected: [String: String] =
            tagsAreDigests ? ["a": "ta", "b": digest] : tellsVersions ? ["a": "ta", "b": listed] : [:]
        #expect(result.snapshot.first?.fingerprint?.tags == expected)
    }

    /// A provider the winner is too large for keeps its older value: the key is not in sync there, so no tags are
    /// recorded, and the next run reads and decides it again (and skips that provider again) rather than taking it
    /// as in sync.
    @Test func aProviderTheValueIsTooLargeForLeavesTheRowUntagged() async throws {
        let large = String(repeating: "L", count: 64)
        let a = MemoryProvider(id: "a", items: [KeyValue("k", large)])
        let b = MemoryProvider(
            id: "b", capabilities: ProviderCapabilities(maxValueBytes: 16), items: [KeyValue("k", "old")])
        let store = try CloudStore(providers: [a, b])
        let result = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: nil)], among: ["a", "b"], listedTags: ["a": ["ta"], "b": ["tb"]])
        #expect(result.skipped == 1 && result.repaired == 0)
        #expect(try await b.get(["k"]).map { try $0.get() } == ["old"])
        #expect(result.snapshot.first?.fingerprint?.tags == [:])

        // The same when the value is also written to a third provider whose written tag would be known.
        var digestTagged = ProviderCapabilities()
        digestTagged.tagsAreValueDigests = true
        let c = MemoryProvider(id: "c", capabilities: digestTagged)
        let three = try CloudStore(providers: [a, b, c])
        let written = try await three.maintenance.syncPage(
            [SyncItem(key: "k", baseline: nil)], among: ["a", "b", "c"],
            listedTags: ["a": ["ta"], "b": ["tb"], "c": [nil]])
        #expect(written.skipped == 1 && written.repaired == 1)
        #expect(written.snapshot.first?.fingerprint?.tags == [:])
    }

    /// A write waiting in the outbox stands for a copy no listing shows, so matching tags vouch for nothing then.
    @Test func aQueuedWriteMeansEveryKeyIsRead() async throws {
        var options = StoreOptions()
        let outbox = try makeOutbox()
        options.outbox = outbox
        options.writeMode = .mirror
        let (store, a, b) = try countedPair([KeyValue("k", "v")], [KeyValue("k", "v")], options: options)
        b.fail(.set, with: CloudSyncError(.offline, "down"))
        _ = try? await store.set("x", forKey: "other")
        #expect(outbox.count > 0)
        let digest = SyncFingerprint.digest(of: "v")
        a.resetCounts()
        b.resetCounts()
        _ = try await store.maintenance.syncPage(
            [SyncItem(key: "k", baseline: SyncFingerprint(["a": digest, "b": digest], tags: ["a": "ta", "b": "tb"]))],
            among: ["a", "b"], listedTags: ["a": ["ta"], "b": ["tb"]])
        #expect(a.keysRequested(.get) == 1 && b.keysRequested(.get) == 1)
    }
}
