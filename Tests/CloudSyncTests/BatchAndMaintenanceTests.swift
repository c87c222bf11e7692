import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

@Suite struct BatchTests {
    @Test func multiGetOf500KeysCostsOneCallPerBatchPerProvider() async throws {
        let first = makeProvider("first", ProviderCapabilities(batchLimit: 100))
        let second = makeProvider("second", ProviderCapabilities(batchLimit: 50))
        let keys = (0..<500).map { "key.\($0)" }
        _ = try await first.set(keys.prefix(300).map { KeyValue($0, "first") })
        _ = try await second.set(keys.suffix(200).dropLast(10).map { KeyValue($0, "second") })
        let store = try makeStore([first, second])

        let values = try await store.multiGet(keys)
        #expect(values.count == 500)
        #expect(values.prefix(300).allSatisfy { $0 == "first" })
        #expect(values[300..<490].allSatisfy { $0 == "second" })
        #expect(values.suffix(10).allSatisfy { $0 == nil })
        #expect(first.calls(.get) == 5)  // 500 keys / 100
        #expect(second.calls(.get) == 4)  // only the 200 the first lacked, / 50
        #expect(second.keysRequested(.get) == 200)
    }

    @Test func multiGetIsPositionalWithDuplicatesAndMissingKeys() async throws {
        let drive = makeProvider("googleDrive")
        _ = try await drive.set([KeyValue("a", "1"), KeyValue("c", "3")])
        let store = try makeStore([drive])
        #expect(try await store.multiGet(["c", "b", "a", "c"]) == ["3", nil, "1", "3"])
        #expect(drive.keysRequested(.get) == 3)
    }

    @Test func multiSetAndMultiRemoveBatchPerProvider() async throws {
        let first = makeProvider("first", ProviderCapabilities(batchLimit: 100))
        let second = makeProvider("second", ProviderCapabilities(batchLimit: 25))
        let store = try makeStore([first, second]) { $0.writeMode = .mirror }
        let items = (0..<250).map { KeyValue("key.\($0)", "v\($0)") }
        let results = try await store.multiSet(items)
        #expect(results.allSatisfy { (try? $0.get())?.stored == ["first", "second"] })
        #expect(first.calls(.set) == 3)
        #expect(second.calls(.set) == 10)
        #expect(try await store.multiGet(items.map(\.key)) == items.map(\.value))

        let removed = try await store.multiRemove(items.map(\.key))
        #expect(removed.allSatisfy { (try? $0.get()) != nil })
        #expect(first.calls(.remove) == 3)
        #expect(second.calls(.remove) == 10)
        #expect(try await store.allKeys().keys.isEmpty)
    }

    @Test func oneFailingKeyDoesNotFailTheBatch() async throws {
        let drive = makeProvider("googleDrive")
        drive.fail(key: "poison", with: CloudSyncError(.quotaExceeded, "full"))
        let store = try makeStore([drive])
        let results = try await store.multiSet([KeyValue("a", "1"), KeyValue("poison", "2"), KeyValue("b", "3")])
        #expect((try? results[0].get()) != nil)
        #expect(throws: CloudSyncError.self) { try results[1].get() }
        #expect((try? results[2].get()) != nil)
        #expect(drive.calls(.set) == 1)
    }

    @Test func aProviderThatBreaksThePositionalContractFailsTheBatchClearly() async throws {
        struct Short: Provider {
            let id = "short"
            let capabilities = ProviderCapabilities()
            func availability() async -> Availability { .available }
            func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { [] }
            func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { [] }
            func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { [] }
            func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
                KeyPage(keys: [], nextCursor: nil)
            }
        }
        let store = try makeStore([Short()])
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "k") }
        #expect(error?.code == .provider)
        #expect(error?.message == "provider returned 0 results for 1 keys; a provider must return one per key")
    }
}

@Suite struct BatchSizingTests {
    @Test func aCommonPageIsTheSmallestWholeMultipleOfEveryBatchAtOrAboveTheFloor() {
        #expect(BatchSizing.commonPage(of: [100, 200], floor: 500) == 600)
        #expect(BatchSizing.commonPage(of: [200, 1000]) == 1000)
        #expect(BatchSizing.commonPage(of: [], floor: 500) == 500)
        // 200 and 999 share no multiple under 10,000: the largest batch's multiple.
        #expect(BatchSizing.commonPage(of: [200, 999], floor: 500) == 999)
        var random = SeededRandom(seed: 31)
        for _ in 0..<2_000 {
            let limits = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                Int.random(in: 1...1_000, using: &random)
            }
            let floor = Int.random(in: 1...2_000, using: &random)
            let page = BatchSizing.commonPage(of: limits, floor: floor)
            #expect(page >= floor)
            // Checked by brute force, independently of the greatest-common-divisor arithmetic.
            let common = (1...BatchSizing.largestCommonPage).first { n in limits.allSatisfy { n % $0 == 0 } }
            let unit = common ?? limits.max()!
            #expect(page % unit == 0, "\(limits) floor \(floor): \(page)")
            #expect(page - unit < floor, "\(limits) floor \(floor): \(page) is not the smallest")
        }
    }
}

@Suite struct OverwriteTests {
    @Test func eachPolicyWritesWhatItsNameSays() {
        // A key holding nothing is written under every policy; an empty value is a value, not nothing.
        for policy in Overwrite.allCases {
            #expect(policy.writes("v", over: nil))
        }
        #expect(Overwrite.always.writes("v", over: "v"))
        #expect(!Overwrite.ifMissing.writes("w", over: "v"))
        #expect(!Overwrite.ifMissing.writes("v", over: ""))
        #expect(Overwrite.ifDifferent.writes("w", over: "v"))
        #expect(!Overwrite.ifDifferent.writes("v", over: "v"))
        #expect(Overwrite.ifDifferent.writes("", over: "v"))
        // Compared as bytes: canonically equivalent spellings are different values.
        #expect(Overwrite.ifDifferent.writes("caf\u{E9}", over: "cafe\u{301}"))
    }
}

@Suite struct ListingAndClearTests {
    @Test func allKeysIsTheUnionAndNamesProvidersThatCannotList() async throws {
        let listing = makeProvider("listing")
        let blind = makeProvider("blind", ProviderCapabilities(canList: false))
        let broken = makeProvider("broken")
        _ = try await listing.set([KeyValue("a", "1"), KeyValue("b", "2")])
        _ = try await broken.set([KeyValue("c", "3")])
        _ = try await blind.set([KeyValue("d", "4")])
        broken.fail(.list, with: offline)
        let store = try makeStore([listing, blind, broken])
        let keys = try await store.allKeys()
        #expect(keys.keys == ["a", "b"])
        #expect(keys.unlisted.keys.sorted() == ["blind", "broken"])
        #expect(keys.unlisted["blind"]?.code == .unsupported)
        #expect(keys.unlisted["broken"]?.code == .offline)
    }

    @Test func listingWalksEveryPage() async throws {
        let drive = makeProvider("googleDrive", ProviderCapabilities(batchLimit: 1000))
        let keys = (0..<2500).map { "k\($0)" }
        _ = try await drive.set(keys.map { KeyValue($0, "v") })
        let store = try makeStore([drive])
        #expect(try await store.allKeys().keys == keys.sorted())
        #expect(drive.calls(.list) == 3)
        #expect(try await store.allItems().count == 2500)
    }

    @Test func clearRemovesListedKeysEverywhereAndSaysWhatItCouldNotSee() async throws {
        let listing = makeProvider("listing")
        let blind = makeProvider("blind", ProviderCapabilities(canList: false))
        let store = try makeStore([listing, blind]) { $0.writeMode = .mirror }
        for key in ["a", "b", "c"] { try await store.set("v", forKey: key) }
        // Written where no list names them: only the provider that cannot list holds these.
        _ = try await blind.set([KeyValue("ghost.1", "x"), KeyValue("ghost.2", "y")])

        let result = try await store.clear()
        #expect(result.removed == 3)
        #expect(result.failed.isEmpty)
        #expect(result.unlisted.keys.sorted() == ["blind"])
        for key in ["a", "b", "c"] {
            #expect(try await raw(listing, key) == nil)
            #expect(try await raw(blind, key) == nil)
        }
        #expect(try await raw(blind, "ghost.1") == "x")
    }

    @Test func clearReportsKeysItCouldNotRemove() async throws {
        let drive = makeProvider("googleDrive")
        _ = try await drive.set([KeyValue("a", "1"), KeyValue("stuck", "2")])
        drive.fail(key: "stuck", with: CloudSyncError(.notSignedIn, "signed out"))
        let result = try await makeStore([drive]).clear()
        #expect(result.removed == 1)
        #expect(result.failed.map(\.key) == ["stuck"])
        #expect(result.failed.first?.error.code == .notSignedIn)
    }
}

@Suite struct QuotaTests {
    @Test func providersThatKnowReportAndOthersReportNothing() async throws {
        let limited = makeProvider("limited", ProviderCapabilities(reportsQuota: true), totalBytes: 1000)
        let pooled = makeProvider("pooled", ProviderCapabilities(reportsQuota: true))
        let silent = makeProvider("cloudKit", ProviderCapabilities(reportsQuota: false))
        _ = try await limited.set([KeyValue("key", "value")])
        let quota = try await makeStore([limited, pooled, silent]).quota()
        #expect(quota.map(\.provider) == ["limited", "pooled"])
        #expect(quota[0].usedBytes == 8)
        #expect(quota[0].totalBytes == 1000)
        #expect(quota[1].usedBytes == 0)
        #expect(quota[1].totalBytes == nil)  // unlimited, not zero
    }

    /// The store's part: a full provider is a reason a person must fix, so the write is refused at once and never
    /// queued (even with an outbox), and in mirror mode the other provider still takes the value while the failure
    /// is reported.
    @Test func aFullProviderRejectsWithQuotaExceeded() async throws {
        let limited = makeProvider("limited", ProviderCapabilities(reportsQuota: true))
        limited.fail(.set, with: CloudSyncError(.quotaExceeded, "the account is full"))
        let store = try makeStore([limited]) { $0.outbox = try! makeOutbox() }
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("data", forKey: "k") }
        #expect(error?.code == .quotaExceeded)
        #expect(error?.provider == "limited")
        #expect(store.pendingWrites().isEmpty)

        let roomy = makeProvider("roomy")
        let errors = ErrorLog()
        let mirrored = try makeStore([limited, roomy]) {
            $0.writeMode = .mirror
            $0.outbox = try! makeOutbox()
            $0.onError = errors.handler
        }
        let receipt = try await mirrored.set("data", forKey: "k")
        #expect(receipt.stored == ["roomy"])
        #expect(receipt.queued.isEmpty)
        #expect(errors.all.map(\.code) == [.quotaExceeded])
        #expect(mirrored.pendingWrites().isEmpty)
    }
}

@Suite struct MigrationTests {
    private func fixture() async throws -> (CloudStore, FaultInjectingProvider, FaultInjectingProvider) {
        // Batches of two for both: a migration's batch is whole for each provider (their common multiple).
        let source = makeProvider("icloudKV", ProviderCapabilities(batchLimit: 2))
        let destination = makeProvider("googleDrive", ProviderCapabilities(batchLimit: 2))
        _ = try await source.set([
            KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("bad", "3"), KeyValue("c", "4"), KeyValue("empty", ""),
            KeyValue("z", "5"),
        ])
        destination.fail(key: "bad", with: CloudSyncError(.quotaExceeded, "full"))
        return (try makeStore([source, destination]), source, destination)
    }

    @Test func continuesPastAFailingKeyAndLeavesTheSourceIntact() async throws {
        let (store, source, destination) = try await fixture()
        let progress = Mutex<[Int]>([])
        let result = try await store.maintenance.migrate(
            from: "icloudKV", to: "googleDrive",
            onProgress: { done, total in
                #expect(total == 6)
                progress.withLock { $0.append(done) }
            })
        // An empty value is a value (the provider contract): it is copied like any other.
        #expect(result.copied == ["a", "b", "c", "empty", "z"])
        #expect(result.skipped == [])
        #expect(result.failed.map(\.key) == ["bad"])
        #expect(result.failed.first?.error.code == .quotaExceeded)
        #expect(result.completed)
        #expect(progress.withLock { $0 } == [2, 4, 6])
        for (key, value) in [("a", "1"), ("b", "2"), ("c", "4"), ("z", "5")] {
            #expect(try await raw(destination, key) == value)
        }
        #expect(try await raw(destination, "empty") == "")
        #expect(try await destination.listKeys(after: nil, limit: 100).keys == ["a", "b", "c", "empty", "z"])
        // The source is left exactly as it was: every key, every value.
        #expect(try await source.listKeys(after: nil, limit: 100).keys == ["a", "b", "bad", "c", "empty", "z"])
        let sourceValues = try await source.get(["a", "b", "bad", "c", "empty", "z"]).map { try $0.get() }
        #expect(sourceValues == ["1", "2", "3", "4", "", "5"])
    }

    @Test func aMoveNeverRemovesAValueWrittenAtTheSourceAfterItsCopy() async throws {
        let source = makeProvider("source")
        let destination = makeProvider("destination")
        _ = try await source.set([KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("c", "3")])
        let store = try makeStore([source, destination])
        var outcomes: [ConditionalRemoval] = []
        _ = try await store.maintenance.migrateByPage(
            from: "source", to: "destination", overwrite: .ifDifferent,
            onLanded: { landed in
                // The app writes `b` again after it was copied, before the move removes it; and `c` goes meanwhile.
                _ = try? await source.set([KeyValue("b", "newer")])
                _ = try? await source.remove(["c"])
                do {
                    outcomes += try await store.removeUnchanged(landed, from: "source")
                } catch {
                    Issue.record("removeUnchanged threw \(error)")
                }
            })
        #expect(outcomes == [.removed, .changed, .absent])
        #expect(try await source.listKeys(after: nil, limit: 10).keys == ["b"])
        #expect(try await raw(source, "b") == "newer")
        #expect(try await destination.listKeys(after: nil, limit: 10).keys == ["a", "b", "c"])
    }

    @Test func aKeyTheDestinationsRulesRefuseFailsByNameAndIsNotWritten() async throws {
        let long = String(repeating: "k", count: 65)
        let source = makeProvider("source")
        let destination = makeProvider("kv", ProviderCapabilities(keyRules: KeyRule.iCloudKeyValue))
        _ = try await source.set([KeyValue("short", "1"), KeyValue(long, "2")])
        let store = try makeStore([source, destination])
        let result = try await store.maintenance.migrate(from: "source", to: "kv")
        #expect(result.copied == ["short"])
        #expect(result.failed.map(\.key) == [long])
        #expect(result.failed.first?.error.code == .invalidKey)
        #expect(result.failed.first?.error.provider == "kv")
        #expect(try await destination.listKeys(after: nil, limit: 10).keys == ["short"])
    }

    @Test func stopsAtTheFirstFailureWhenAskedAndSaysHowFarItGot() async throws {
        let (store, _, destination) = try await fixture()
        let result = try await store.maintenance.migrate(from: "icloudKV", to: "googleDrive", continueOnError: false)
        #expect(!result.completed)
        // It stops after the batch (of two, both providers' limit) that held the failure: "c" shared that batch.
        #expect(result.copied == ["a", "b", "c"])
        #expect(result.failed.map(\.key) == ["bad"])
        #expect(result.total == 6)
        #expect(try await raw(destination, "z") == nil)
    }

    @Test func aFilterMigratesASubsetAndCodecsAreAppliedPerProvider() async throws {
        let source = makeProvider("source")
        let destination = makeProvider("vault")
        _ = try await source.set([KeyValue("settings.theme", "dark"), KeyValue("cache.x", "junk")])
        let store = try makeStore([source, destination]) { $0.providerCodecs = ["vault": BracketCodec()] }
        let result = try await store.maintenance.migrate(
            from: "source", to: "vault", filter: { $0.hasPrefix("settings.") })
        #expect(result.copied == ["settings.theme"])
        #expect(try await raw(destination, "settings.theme") == "[enc:settings.theme:dark]")
        #expect(try await raw(destination, "cache.x") == nil)
    }

    /// An encrypted value truncated to nothing is not "holding nothing": it cannot be decoded, as `verify` says.
    @Test func aValueThatCannotBeDecodedFailsWithDecodeRatherThanBeingSkipped() async throws {
        let source = makeProvider("vault")
        let destination = makeProvider("plain")
        _ = try await source.set([KeyValue("truncated", ""), KeyValue("whole", "[enc:whole:v]")])
        let store = try makeStore([source, destination]) { $0.providerCodecs = ["vault": BracketCodec()] }
        let result = try await store.maintenance.migrate(from: "vault", to: "plain")
        #expect(result.copied == ["whole"])
        #expect(result.skipped == [])
        #expect(result.failed.map(\.key) == ["truncated"])
        #expect(result.failed.first?.error.code == .decode)
        #expect(try await raw(destination, "truncated") == nil)
    }

    @Test func withoutOverwriteAKeyTheDestinationCouldNotReadFailsAndIsNeverReplaced() async throws {
        let source = makeProvider("source")
        let destination = makeProvider("backup")
        _ = try await source.set([KeyValue("kept", "new"), KeyValue("fresh", "1")])
        _ = try await destination.set([KeyValue("kept", "old")])
        let flaky = UnreadableKeys(wrapped: destination, keys: ["kept"])
        let store = try makeStore([source, flaky])
        let result = try await store.maintenance.migrate(from: "source", to: "backup", overwrite: false)
        // Whether the destination holds "kept" is unknown: copying over it could replace what it has.
        #expect(result.failed.map(\.key) == ["kept"])
        #expect(result.failed.first?.error.code == .server)
        #expect(result.copied == ["fresh"])
        #expect(try await raw(destination, "kept") == "old")
    }

    @Test func unknownProvidersAreAConfigurationError() async throws {
        let store = try makeStore([makeProvider("a")])
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.maintenance.migrate(from: "a", to: "nope")
        }
        #expect(error?.code == .config)
        #expect(error?.message == "no provider with id nope is configured; configured: a")
    }
}

/// A provider whose reads of `keys` fail (a transient outage of those keys), while writes go through.
private struct UnreadableKeys: ForwardingProvider {
    let wrapped: any Provider
    let keys: Set<String>

    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        let results = try await wrapped.get(keys)
        return zip(keys, results).map { key, result in
            self.keys.contains(key) ? .failure(CloudSyncError(.server, "503 from the server")) : result
        }
    }
}
