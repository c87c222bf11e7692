import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// Packs that describe themselves: an index lost or damaged is rebuilt from the packs, and verify notices an index
/// that disagrees with them.
@Suite struct RepairIndexTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    /// A repository of three snapshots over several packs (small ones), one value large enough to be chunked.
    func repository() async throws -> (CloudStore, MemoryProvider, [(String, [KeyValue])]) {
        let vault = MemoryProvider(id: "vault")
        let store = try CloudStore(providers: [vault])
        let repository = try await BackupRepository.open(
            in: store, provider: "vault", codec: ring, create: true, packBytes: 64 << 10)
        var state = (0..<400).map { KeyValue("k\($0)", "value \($0) " + String(repeating: "x", count: $0 % 50)) }
        state.append(KeyValue("large", (0..<20_000).map { "line \($0)\n" }.joined()))
        var snapshots: [(String, [KeyValue])] = []
        for time in 1...3 {
            state[time] = KeyValue(state[time].key, "changed at \(time)")
            let session = repository.startBackup()
            try await session.add(state)
            let result = try await session.finish(source: "app", pipeline: "p", time: Int64(time))
            snapshots.append((result.snapshotID, state.sorted { StoreKey.bytesPrecede($0.key, $1.key) }))
        }
        return (store, vault, snapshots)
    }

    @Test func everyIndexDeletedIsRebuiltFromThePacksAndEverySnapshotRestores() async throws {
        let (store, vault, snapshots) = try await repository()
        let indexes = try await listEveryKey(of: vault).filter { $0.contains(".index.") }
        #expect(!indexes.isEmpty)
        _ = try await vault.remove(indexes)
        let broken = try await BackupRepository.open(
            in: store, provider: "vault", codec: ring, create: false)
        // Even before the repair, a restore finds every blob through the packs' own headers.
        #expect(try await broken.restore(snapshot: snapshots[2].0) == snapshots[2].1)

        let repair = try await broken.withLock(exclusive: true) { lock throws(CloudSyncError) in
            try await broken.repairIndex(holding: lock)
        }
        #expect(repair.packsNotIndexed.isEmpty && repair.packsKeptFromOldIndex == 0 && repair.packsRead > 3)
        let repaired = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        for (id, state) in snapshots { #expect(try await repaired.restore(snapshot: id) == state) }
        #expect(try await repaired.verify(readData: 1).problems.isEmpty)
    }

    /// A damaged index object is replaced; the packs say everything it said.
    @Test func aDamagedIndexIsReplaced() async throws {
        let (store, vault, snapshots) = try await repository()
        let index = try #require(try await listEveryKey(of: vault).first { $0.contains(".index.") })
        _ = try await vault.set([KeyValue(index, "zstd:AAAA")])
        let checking = try await BackupRepository.open(
            in: store, provider: "vault", codec: ring, create: false)
        #expect(try await checking.verify(readData: 0).problems.map(\.object).contains(index))
        let repair = try await checking.repairIndex()
        #expect(repair.indexesReplaced >= 1)
        #expect(try await listEveryKey(of: vault).contains(index) == false)
        let repaired = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(try await repaired.restore(snapshot: snapshots[0].0) == snapshots[0].1)
        #expect(try await repaired.verify(readData: 1).problems.isEmpty)
    }

    /// An index that names a blob its pack's header does not is a problem verify names, pointing at the repair.
    @Test func verifyNamesAnIndexThatDisagreesWithItsPack() async throws {
        let (store, _, _) = try await repository()
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        let (id, location) = try #require(repository.index.first)
        let name = BackupRepository.prefix + "data." + location.pack
        let plaintext = try await repository.readObjects([name])[0]
        let blobs = try #require(PackHeader.blobs(of: plaintext))
        let end = blobs.map { $0.offset + $0.length }.max() ?? 0
        // The same blobs, under a header that leaves one out.
        _ = try await repository.writeObjects([
            (name, Array(plaintext[..<end]) + PackHeader.encoded(blobs.filter { $0.id != id }))
        ])
        let problems = try await repository.verify(readData: 1).problems
        #expect(
            problems.contains { $0.object == name && $0.message.contains("header") && $0.message.contains("repair") },
            "\(problems)")
    }
}
