import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// Forget, prune, verify and locks on a memory provider: what each removes, what it leaves restorable, and what it
/// finds damaged.
@Suite struct RetentionAndVerifyTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
    let clock = ManualClock()

    func fixture() throws -> (CloudStore, FaultInjectingProvider) {
        let vault = FaultInjectingProvider(id: "vault")
        var options = StoreOptions()
        options.clock = clock
        return (try CloudStore(providers: [vault], options: options), vault)
    }

    func open(_ store: CloudStore, packBytes: Int = 16 << 10) async throws -> BackupRepository {
        try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true, packBytes: packBytes)
    }

    /// Backs `state` up as one snapshot taken at `time`.
    func backUp(_ state: [KeyValue], into store: CloudStore, time: Int64, tags: [String] = []) async throws
        -> BackupResult
    {
        let session = try await open(store).startBackup()
        try await session.add(state)
        return try await session.finish(source: "app", pipeline: "nightly", tags: tags, time: time, host: "test")
    }

    func storedBytes(_ store: CloudStore) async throws -> Int {
        let keys = try await store.listKeys(of: "vault")
        return try await store.read(keys, from: "vault").reduce(0) { $0 + ($1?.utf8.count ?? 0) }
    }

    func sorted(_ items: [KeyValue]) -> [KeyValue] { items.sorted { StoreKey.bytesPrecede($0.key, $1.key) } }

    @Test func forgettingTheFirstSnapshotAndPruningShrinksTheRepositoryAndLeavesTheLatestWhole() async throws {
        let (store, _) = try fixture()
        var state = (0..<1_000).map { KeyValue("prefs.user\($0)", "value \($0) " + String(repeating: "x", count: 200)) }
        let first = try await backUp(state, into: store, time: 1_000)
        for index in 0..<100 { state[index] = KeyValue(state[index].key, "changed \(index)") }
        state.removeLast(50)
        let second = try await backUp(state, into: store, time: 2_000)
        let before = try await storedBytes(store)

        var policy = KeepPolicy()
        policy.last = 1
        let repository = try await open(store)
        let forgotten = try await repository.forget(policy: policy)
        #expect(forgotten.removed.map(\.id) == [first.snapshotID])
        #expect(forgotten.kept.map(\.id) == [second.snapshotID])
        let forgottenBytes = try await storedBytes(store)
        let pruned = try await repository.prune(maxUnused: 0)
        let after = try await storedBytes(store)
        #expect(pruned.objectsDeleted > 0 && pruned.bytesFreed > 0)
        #expect(after < before - 150 * 200, "from \(before) to \(after)")
        #expect(forgottenBytes - after == pruned.bytesFreed)

        let reopened = try await open(store)
        #expect(try await reopened.restore(snapshot: second.snapshotID) == sorted(state))
        #expect(try await reopened.verify(readData: 1).problems == [])
    }

    @Test func anEmptyPolicyIsRefusedAndNothingIsRemoved() async throws {
        let (store, _) = try fixture()
        _ = try await backUp([KeyValue("k", "v")], into: store, time: 1)
        let repository = try await open(store)
        await #expect {
            _ = try await repository.forget(policy: KeepPolicy())
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .config && error?.message.contains("last") == true
        }
        #expect(try await repository.snapshots().count == 1)
    }

    @Test func aPruneThatCouldNotDeleteLeavesEverySnapshotRestorableAndTheNextPruneFinishes() async throws {
        let (store, vault) = try fixture()
        let old = (0..<300).map { KeyValue("a\($0)", "old \($0) " + String(repeating: "y", count: 100)) }
        let new = (0..<300).map { KeyValue("a\($0)", "new \($0) " + String(repeating: "z", count: 100)) }
        _ = try await backUp(old, into: store, time: 1)
        let kept = try await backUp(new, into: store, time: 2)
        var policy = KeepPolicy()
        policy.last = 1
        let repository = try await open(store)
        _ = try await repository.forget(policy: policy)
        // Killed between writing the new index and deleting the old objects: every delete fails.
        vault.fail(.remove, with: CloudSyncError(.offline, "gone"))
        await #expect(throws: CloudSyncError.self) { _ = try await repository.prune(maxUnused: 0) }
        let interrupted = try await open(store)
        #expect(try await interrupted.verify(readData: 1).problems == [])
        #expect(try await interrupted.restore(snapshot: kept.snapshotID) == sorted(new))

        vault.fail(.remove, with: CloudSyncError(.offline, "gone"), times: 0)
        let again = try await interrupted.prune(maxUnused: 0)
        #expect(again.objectsDeleted > 0)
        let finished = try await open(store)
        #expect(try await finished.verify(readData: 1).problems == [])
        #expect(try await finished.restore(snapshot: kept.snapshotID) == sorted(new))
    }

    @Test func aFlippedByteInAnySnapshotIndexOrPackIsNamedByVerify() async throws {
        let (store, vault) = try fixture()
        _ = try await backUp((0..<200).map { KeyValue("k\($0)", "value \($0)") }, into: store, time: 1)
        let objects = try await listEveryKey(of: vault).filter {
            !$0.hasSuffix(".config") && !$0.contains(".lock.")
        }
        #expect(objects.contains { $0.contains(".data.") } && objects.contains { $0.contains(".index.") })
        for object in objects {
            let original = try #require(try await vault.get([object])[0].get())
            let mark = RepositoryKeys.mark(of: original)
            var sealed = [UInt8](Data(base64Encoded: String(original.dropFirst(mark.count)))!)
            sealed[sealed.count - 20] ^= 0x40
            _ = try await vault.set([KeyValue(object, mark + Data(sealed).base64EncodedString())])
            let repository = try await BackupRepository.open(
                in: store, provider: "vault", codec: ring, create: false)
            let problems = try await repository.verify(readData: 1).problems
            #expect(problems.map(\.object).contains(object), "\(object): \(problems)")
            #expect(problems.allSatisfy { $0.code == .decode })
            _ = try await vault.set([KeyValue(object, original)])
        }
        let whole = try await open(store)
        #expect(try await whole.verify(readData: 1).problems == [])
    }

    @Test func aPruneWaitsForNoOneButIsRefusedBesideAFreshBackupLockAndNotBesideAStaleOne() async throws {
        let (store, _) = try fixture()
        _ = try await backUp([KeyValue("k", "v")], into: store, time: 1)
        let repository = try await open(store)
        let backup = try await repository.lock(exclusive: false, host: "node-a")
        let reader = try await repository.lock(exclusive: false, host: "node-b")
        await #expect {
            _ = try await repository.lock(exclusive: true, host: "node-c")
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .locked && error?.message.contains("node-") == true
        }
        try await reader.release()
        // node-a died holding its lock: once it is stale, a prune may go ahead and removes it.
        clock.advance(by: .milliseconds(RepositoryLock.staleAfter + 1))
        let prune = try await repository.lock(exclusive: true, host: "node-c")
        await #expect {
            _ = try await repository.lock(exclusive: false, host: "node-d")
        } throws: { error in (error as? CloudSyncError)?.code == .locked }
        try await prune.release()
        _ = backup
        #expect(try await store.listKeys(of: "vault").filter { $0.contains(".lock.") } == [])
    }

    /// Objects fit the provider's value limit, and a value larger than a pack there is stored in chunks that do.
    @Test func everyObjectFitsTheProvidersValueLimitAndALargerValueIsStoredInChunks() async throws {
        let limited = FaultInjectingProvider(id: "vault", capabilities: ProviderCapabilities(maxValueBytes: 20_000))
        var options = StoreOptions()
        options.clock = clock
        let store = try CloudStore(providers: [limited], options: options)
        let items = (0..<300).map { KeyValue("k\($0)", "value \($0) " + String(repeating: "w", count: 500)) }
        let huge = KeyValue("huge", (0..<4_000).map { "line \($0) of the huge value\n" }.joined())
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let session = repository.startBackup()
        #expect(try await session.add(items + [huge]).isEmpty)
        let result = try await session.finish(source: "app", pipeline: "p", time: 1)
        #expect(result.keys == 301)
        let keys = try await store.listKeys(of: "vault")
        let sizes = try await store.read(keys, from: "vault").map { $0?.utf8.count ?? 0 }
        #expect(keys.filter { $0.contains(".data.") }.count > 1)
        #expect(sizes.allSatisfy { $0 <= 20_000 }, "\(sizes.max() ?? 0)")
        #expect(try await repository.restore(snapshot: result.snapshotID) == sorted(items + [huge]))
    }

    @Test func aRestoreStreamsPagesAndReadsEachPackOnce() async throws {
        let (store, vault) = try fixture()
        let items = (0..<500).map {
            KeyValue(String(format: "k%04d", $0), "value \($0) " + String(repeating: "s", count: 60))
        }
        let repository = try await open(store, packBytes: 4 << 10)
        let session = repository.startBackup()
        try await session.add(items.shuffled())
        let result = try await session.finish(source: "app", pipeline: "p", time: 1)
        let packs = try await store.listKeys(of: "vault").filter { $0.contains(".data.") }.count
        #expect(packs > 10)
        vault.resetCounts()
        var pages: [[KeyValue]] = []
        let others: (String) -> Bool = { $0 != "k0003" }
        try await repository.restore(snapshot: result.snapshotID, pageSize: 10, keys: others) { pages.append($0) }
        #expect(pages.dropLast().allSatisfy { $0.count == 10 } && pages.count == 50)
        #expect(sorted(pages.flatMap { $0 }) == items.filter { $0.key != "k0003" })
        // The snapshot object, then each pack once (a pack holding trees is read again for its values).
        #expect(vault.keysRequested(.get) <= packs + 3, "\(vault.keysRequested(.get)) reads of \(packs) packs")
    }

    @Test func aBackupAfterAParentReadsOnlyTheKeysWhoseVersionTagMoved() async throws {
        let source = MemoryProvider(id: "app")
        let store = try CloudStore(providers: [source, FaultInjectingProvider(id: "vault")])
        _ = try await source.set((0..<300).map { KeyValue("k\($0)", "first \($0)") })
        /// One backup as the job runs it: listing pages with their tags, reading only what moved.
        func backUp(time: Int64) async throws -> (BackupResult, read: Int) {
            let repository = try await open(store)
            let parent = try await repository.snapshots().last
            let session = try await repository.startBackup(after: parent)
            var cursor: String?
            var read = 0
            repeat {
                let page = try await store.keyPage(of: "app", after: cursor, limit: 100)
                cursor = page.nextCursor
                #expect(page.versions != nil)
                let keys = session.keysToRead(page.keys, versions: page.versions)
                read += keys.count
                let values = try await store.read(keys, from: "app")
                try await session.add(zip(keys, values).compactMap { key, value in value.map { KeyValue(key, $0) } })
            } while cursor != nil
            return (try await session.finish(source: "app", pipeline: "p", time: time, host: "h"), read)
        }
        let (first, firstRead) = try await backUp(time: 1)
        #expect(firstRead == 300 && first.unread == 0)
        _ = try await source.set([KeyValue("k7", "second 7"), KeyValue("k8", "second 8")])
        _ = try await source.remove(["k9"])
        let (second, secondRead) = try await backUp(time: 2)
        #expect(secondRead == 2 && second.unread == 297 && second.keys == 299 && second.new == 2)
        var expected = (0..<300).map { KeyValue("k\($0)", "first \($0)") }.filter { $0.key != "k9" }
        expected = expected.map {
            ["k7", "k8"].contains($0.key) ? KeyValue($0.key, "second " + $0.key.dropFirst()) : $0
        }
        let repository = try await open(store)
        #expect(try await repository.restore(snapshot: second.snapshotID) == sorted(expected))
        let summaries = try await repository.snapshots()
        #expect(summaries.last?.bytes == expected.reduce(0) { $0 + $1.value.utf8.count })
        // A third backup with nothing changed reads nothing and stores no new tree.
        let (third, thirdRead) = try await backUp(time: 3)
        #expect(thirdRead == 0 && third.treesAdded == 0 && third.new == 0)
    }

    @Test func aBackupKilledAfterSomePacksLeavesARepositoryVerifyPassesAndPruneTidies() async throws {
        let (store, vault) = try fixture()
        let kept = try await backUp([KeyValue("a", "1"), KeyValue("b", "2")], into: store, time: 1)
        let repository = try await open(store, packBytes: 2 << 10)
        let session = repository.startBackup()
        try await session.add((0..<200).map { KeyValue("k\($0)", "value \($0) " + String(repeating: "q", count: 50)) })
        // The process dies here: nothing more it writes lands (neither its last pack, its index nor its snapshot).
        vault.fail(.set, with: CloudSyncError(.offline, "killed"))
        await #expect(throws: CloudSyncError.self) {
            _ = try await session.finish(source: "app", pipeline: "p", time: 2)
        }
        vault.fail(.set, with: CloudSyncError(.offline, "killed"), times: 0)

        let after = try await open(store)
        let check = try await after.verify(readData: 1)
        #expect(check.problems == [] && check.unindexedPacks > 0, "\(check)")
        #expect(try await after.snapshots().map(\.id) == [kept.snapshotID])
        #expect(try await after.restore(snapshot: kept.snapshotID) == [KeyValue("a", "1"), KeyValue("b", "2")])
        let pruned = try await after.prune()
        // The unindexed packs, and the index it replaced with one of everything kept.
        #expect(pruned.objectsDeleted == check.unindexedPacks + check.indexes)
        let tidy = try await open(store).verify(readData: 1)
        #expect(tidy.problems == [] && tidy.unindexedPacks == 0 && tidy.snapshots == 1 && tidy.packsRead == tidy.packs)
    }
}
