import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// Damage stays where it is: one damaged object hides no snapshot that does not need it, and a lock left by a
/// process that died on this machine holds nobody up.
@Suite struct DamageIsolationTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    /// Three snapshots, some values shared, in small packs, so snapshots share some packs and not others.
    func repository() async throws -> (CloudStore, MemoryProvider, states: [String: [KeyValue]]) {
        let vault = MemoryProvider(id: "vault")
        let store = try CloudStore(providers: [vault])
        var states: [String: [KeyValue]] = [:]
        for round in 0..<3 {
            let repository = try await BackupRepository.open(
                in: store, provider: "vault", codec: ring, create: true, packBytes: 4 << 10)
            let session = repository.startBackup()
            let state = (0..<60).map { KeyValue("key\($0)", $0 % 3 == 0 ? "shared \($0)" : "round \(round) \($0)") }
            try await session.add(state)
            let result = try await session.finish(source: "app", pipeline: "p", time: Int64(round))
            states[result.snapshotID] = state
        }
        return (store, vault, states)
    }

    /// The objects a snapshot cannot be restored without: its own object and every pack holding one of its blobs;
    /// and of those, the ones without which not even its keys are known (the object and its trees' packs).
    func ownObjects(of id: String, in repository: BackupRepository) async throws
        -> (all: Set<String>, keys: Set<String>)
    {
        let name = BackupRepository.prefix + "snapshot." + id
        let trees = try await repository.treeIDs(of: id)
        let values = try await repository.entries(ofTrees: trees, in: name).map { $0[1] }
        func packs(_ blobs: some Sequence<String>) -> Set<String> {
            Set(blobs.compactMap { repository.index[$0].map { BackupRepository.prefix + "data." + $0.pack } })
        }
        let keys = packs(trees).union([name])
        return (keys.union(packs(try await repository.valueBlobs(of: values, in: name))), keys)
    }

    /// Every object but the config, damaged in turn: every snapshot whose own objects are intact is listed and
    /// restores equal, and one that needs the damaged object is named (listing) or loses only the keys (or runs of
    /// keys, for a tree) the damaged object held, named.
    @Test func everySnapshotWhoseOwnObjectsAreIntactRestoresWhateverElseIsDamaged() async throws {
        let (store, vault, states) = try await repository()
        let whole = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        var own: [String: (all: Set<String>, keys: Set<String>)] = [:]
        for id in states.keys { own[id] = try await ownObjects(of: id, in: whole) }
        let objects = try await listEveryKey(of: vault).filter { !$0.hasSuffix(".config") }
        #expect(objects.contains { $0.contains(".index.") } && objects.count > 10)
        for object in objects {
            let original = try #require(try await vault.get([object])[0].get())
            _ = try await vault.set([KeyValue(object, flipped(original))])
            let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
            let listing = try await repository.snapshotListing()
            #expect(listing.damaged.map(\.object) == (object.contains(".snapshot.") ? [object] : []), "\(object)")
            #expect(
                Set(listing.snapshots.map(\.id))
                    == Set(states.keys.filter { !object.hasSuffix($0) }), "\(object)")
            for (id, state) in states where !own[id]!.all.contains(object) {
                let restored = try await repository.restore(snapshot: id)
                #expect(restored == state.sorted { StoreKey.bytesPrecede($0.key, $1.key) }, "\(id) with \(object)")
            }
            for (id, state) in states where own[id]!.all.contains(object) && !object.contains(".snapshot.") {
                // A damaged value pack loses only the keys whose values it held, each named; a damaged tree pack
                // the runs of keys its trees held, each tree named. Everything else comes back.
                var lost: [String] = []
                var lostTrees = 0
                var back: [KeyValue] = []
                try await repository.restore(snapshot: id) { item throws(CloudSyncError) in
                    switch item {
                    case .values(let page): back += page
                    case .unreadable(let key, let error):
                        #expect(error.code == .decode)
                        lost.append(key)
                    case .unreadableTree(_, let error):
                        #expect(error.code == .decode)
                        lostTrees += 1
                    case .file: Issue.record("no value here is large or binary")
                    }
                }
                #expect(Set(back).isSubset(of: Set(state)), "\(id) with \(object)")
                #expect((lostTrees > 0) == own[id]!.keys.contains(object), "\(id) with \(object)")
                if lostTrees == 0 { #expect(back.count + lost.count == state.count, "\(id) with \(object)") }
            }
            _ = try await vault.set([KeyValue(object, original)])
        }
    }

    /// A prune would take the packs only a damaged index names for leftovers: it refuses and removes nothing.
    @Test func aPruneIsRefusedWhileAnIndexIsDamaged() async throws {
        let (store, vault, _) = try await repository()
        let index = try #require(try await listEveryKey(of: vault).first { $0.contains(".index.") })
        let original = try #require(try await vault.get([index])[0].get())
        _ = try await vault.set([KeyValue(index, flipped(original))])
        let before = try await listEveryKey(of: vault)
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(repository.damagedIndexes.map(\.object) == [index])
        await #expect {
            _ = try await repository.prune(maxUnused: 0)
        } throws: { error in
            (error as? CloudSyncError)?.code == .decode && (error as? CloudSyncError)?.key == index
        }
        #expect(try await listEveryKey(of: vault) == before)
    }

    /// A lock whose holder ran on this machine and is gone is stale at once; one whose holder still runs holds.
    @Test func aLockLeftByADeadProcessOnThisHostIsStaleAtOnce() async throws {
        let (store, _, _) = try await repository()
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        let host = ProcessInfo.processInfo.hostName
        let dead = try Self.exitedProcessID()
        func leaveLock(pid: Int, host: String) async throws -> String {
            let name = BackupRepository.prefix + "lock." + BackupRepository.randomID()
            let now = store.clock.nowMilliseconds()
            let lock: [String: Any] = ["time": now, "host": host, "pid": pid, "exclusive": false]
            _ = try await repository.writeObjects([(name, BackupRepository.json(lock))])
            return name
        }
        let left = try await leaveLock(pid: dead, host: host)
        let prune = try await repository.lock(exclusive: true, host: host)
        #expect(!repository.objectNames("lock").contains(left))
        try await prune.release()

        // The same dead process id on another machine, and a live process here, still hold the repository.
        for (pid, where_) in [(dead, "elsewhere"), (1, host)] {
            let name = try await leaveLock(pid: pid, host: where_)
            await #expect {
                _ = try await repository.lock(exclusive: true, host: host)
            } throws: { error in
                (error as? CloudSyncError)?.code == .locked
            }
            try await repository.removeObjects([name])
        }
    }

    /// `unlock` removes the stale locks (a dead holder here, an old one anywhere) and keeps the live ones, which
    /// `removeAll` removes too.
    @Test func unlockRemovesStaleLocksAndKeepsLiveOnesUnlessToldToRemoveAll() async throws {
        let clock = ManualClock()
        var options = StoreOptions()
        options.clock = clock
        let store = try CloudStore(providers: [MemoryProvider(id: "vault")], options: options)
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let host = ProcessInfo.processInfo.hostName
        func leaveLock(pid: Int, host: String, minutesAgo: Int64) async throws -> String {
            let name = BackupRepository.prefix + "lock." + BackupRepository.randomID()
            let time = clock.nowMilliseconds() - minutesAgo * 60_000
            let lock: [String: Any] = ["time": time, "host": host, "pid": pid, "exclusive": false]
            _ = try await repository.writeObjects([(name, BackupRepository.json(lock))])
            return name
        }
        let dead = try await leaveLock(pid: try Self.exitedProcessID(), host: host, minutesAgo: 0)
        let old = try await leaveLock(pid: 1, host: "elsewhere", minutesAgo: 16)
        let live = try await leaveLock(pid: 1, host: host, minutesAgo: 1)
        let first = try await repository.unlock()
        #expect(Set(first.removed.map(\.name)) == [dead, old] && first.kept.map(\.name) == [live])
        #expect(first.kept.first?.holder == "\(host) (pid 1)" && first.kept.first?.minutesOld == 1)
        let second = try await repository.unlock(removeAll: true)
        #expect(second.removed.map(\.name) == [live] && second.kept.isEmpty)
        #expect(try await repository.heldLocks(host: host, now: clock.nowMilliseconds()).isEmpty)
    }

    /// The id of a process that ran on this machine and has exited.
    static func exitedProcessID() throws -> Int {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        return Int(child.processIdentifier)
    }

    /// `stored` with one byte of its sealed bytes changed, so it no longer authenticates.
    func flipped(_ stored: String) -> String {
        let mark = RepositoryKeys.mark(of: stored)
        var sealed = [UInt8](Data(base64Encoded: String(stored.dropFirst(mark.count)))!)
        sealed[sealed.count - 20] ^= 0x40
        return mark + Data(sealed).base64EncodedString()
    }
}
