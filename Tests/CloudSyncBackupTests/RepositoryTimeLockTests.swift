import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// Locks age by the repository's own clock (the provider's modification times), so hosts whose clocks disagree, or
/// a backup paused past the stale window, never let a prune delete what a backup's snapshot will name.
@Suite struct RepositoryTimeLockTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    /// A repository on a provider with its own clock, and a first snapshot in it (written by a host on that clock).
    struct World {
        let repositoryClock = ManualClock()
        let vault: MemoryProvider
        let first: [KeyValue] = (0..<40).map { KeyValue("old\($0)", "first snapshot's value \($0)") }

        init() { vault = MemoryProvider(id: "vault", clock: repositoryClock) }

        /// A host's store, its clock `skew` minutes from the repository's.
        func host(skew: Int64) throws -> (CloudStore, ManualClock) {
            let clock = ManualClock(milliseconds: repositoryClock.nowMilliseconds() + skew * 60_000)
            var options = StoreOptions()
            options.clock = clock
            return (try CloudStore(providers: [vault], options: options), clock)
        }

        /// Moves the repository's clock and the hosts' by `minutes`.
        func pass(minutes: Int64, _ hosts: ManualClock...) async {
            for clock in [repositoryClock] + hosts { clock.advance(by: .seconds(minutes * 60)) }
        }
    }

    func open(_ store: CloudStore) async throws -> BackupRepository {
        try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true, packBytes: 4 << 10)
    }

    /// A backup under way on `store`: its lock taken, and values in packs written (`packs`) but in no index yet.
    func backupUnderWay(on store: CloudStore, host: String) async throws
        -> (packs: Set<String>, lock: RepositoryLock, session: BackupSession, state: [KeyValue])
    {
        let repository = try await open(store)
        let before = Set(repository.objectNames("data"))
        let lock = try await repository.lock(exclusive: false, host: host)
        let session = repository.startBackup()
        let state = (0..<200).map { KeyValue("new\($0)", "value \($0) " + String(repeating: "\($0 % 10)", count: 120)) }
        try await session.add(state)
        let packs = Set(repository.objectNames("data")).subtracting(before)
        #expect(packs.count > 3, "the session wrote packs before finishing")
        return (packs, lock, session, state)
    }

    /// Forgets all but the newest snapshot and prunes, as host `host` (the test's "prune host").
    func forgetAndPrune(on store: CloudStore, host: String) async throws -> PruneResult {
        let repository = try await open(store)
        let lock = try await repository.lock(exclusive: true, host: host)
        var keepLast = KeepPolicy()
        keepLast.last = 1
        _ = try await repository.forget(policy: keepLast)
        let result = try await repository.prune(holding: lock)
        try await lock.release()
        return result
    }

    func firstSnapshot(_ world: World, on store: CloudStore) async throws {
        let repository = try await open(store)
        let session = repository.startBackup()
        try await session.add(world.first)
        _ = try await session.finish(source: "app", pipeline: "p", time: store.clock.nowMilliseconds())
    }

    /// A full verify finds no problem, and snapshot `id` (the first when nil) restores `state`.
    func expectWhole(_ store: CloudStore, snapshot id: String? = nil, state: [KeyValue]) async throws {
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        let check = try await repository.verify(readData: 1)
        #expect(check.problems == [])
        let first = try await repository.snapshots().first?.id
        let chosen = try #require(id ?? first)
        let restored = try await repository.restore(snapshot: chosen)
        #expect(restored.sorted { $0.key < $1.key } == state.sorted { $0.key < $1.key })
    }

    /// Two hosts, the backup's clock 30 minutes behind or ahead of the prune host's: the prune host finds the
    /// backup's lock fresh by the repository's clock and refuses, and the backup's snapshot restores whole.
    @Test(arguments: [-30, 30] as [Int64]) func aPruneOnAHostWhoseClockDisagreesLeavesALiveBackupAlone(skew: Int64)
        async throws
    {
        let world = World()
        let (backupHost, backupClock) = try world.host(skew: skew)
        let (pruneHost, pruneClock) = try world.host(skew: 0)
        try await firstSnapshot(world, on: pruneHost)
        let (_, lock, session, state) = try await backupUnderWay(on: backupHost, host: "host-a")
        await world.pass(minutes: 3, backupClock, pruneClock)
        await #expect(throws: CloudSyncError.self) { _ = try await forgetAndPrune(on: pruneHost, host: "host-b") }
        let result = try await session.finish(
            source: "app", pipeline: "p", time: backupClock.nowMilliseconds(), holding: lock)
        try await lock.release()
        try await expectWhole(pruneHost, snapshot: result.snapshotID, state: state)
    }

    /// A backup paused past the stale window by the repository's clock loses its lock to a prune, which deletes its
    /// packs: resumed, it writes no index and no snapshot (ERR_LOCKED), so no snapshot names a deleted pack.
    @Test func aBackupWhoseLockAPruneTookForStaleStopsBeforeItsSnapshot() async throws {
        let world = World()
        let (backupHost, backupClock) = try world.host(skew: 0)
        let (pruneHost, pruneClock) = try world.host(skew: 0)
        try await firstSnapshot(world, on: pruneHost)
        let (written, lock, session, _) = try await backupUnderWay(on: backupHost, host: "host-a")
        await world.pass(minutes: 16, backupClock, pruneClock)
        let pruned = try await forgetAndPrune(on: pruneHost, host: "host-b")
        #expect(pruned.objectsDeleted > 0)
        let left = Set(try await listEveryKey(of: world.vault))
        #expect(!written.isSubset(of: left), "the prune deleted the paused backup's packs")
        await #expect(throws: CloudSyncError.self) {
            _ = try await session.finish(
                source: "app", pipeline: "p", time: backupClock.nowMilliseconds(), holding: lock)
        }
        #expect(try await listEveryKey(of: world.vault).filter { $0.contains(".snapshot.") }.count == 1)
        try await expectWhole(pruneHost, state: world.first)
    }

    /// Packs no index names yet are kept while younger than the stale window by the repository's clock, even with
    /// no lock to protect them (removed by `unlock --remove-all`), and collected by a prune after it.
    @Test func aPruneKeepsUnindexedPacksYoungerThanTheStaleWindow() async throws {
        let world = World()
        let (backupHost, backupClock) = try world.host(skew: 0)
        let (pruneHost, pruneClock) = try world.host(skew: 0)
        try await firstSnapshot(world, on: pruneHost)
        let written = try await backupUnderWay(on: backupHost, host: "host-a").packs
        _ = try await (try await open(pruneHost)).unlock(removeAll: true, host: "host-b")
        await world.pass(minutes: 10, backupClock, pruneClock)
        _ = try await forgetAndPrune(on: pruneHost, host: "host-b")
        #expect(written.isSubset(of: Set(try await listEveryKey(of: world.vault))))
        await world.pass(minutes: 6, backupClock, pruneClock)
        _ = try await forgetAndPrune(on: pruneHost, host: "host-b")
        #expect(written.isDisjoint(with: Set(try await listEveryKey(of: world.vault))))
        try await expectWhole(pruneHost, state: world.first)
    }
}
