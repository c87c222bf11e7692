import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// A snapshot of more trees than one object should name names lists of them (and lists of lists): it restores,
/// a backup after it reads only what changed, and a prune keeps the lists.
@Suite struct TreeListTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    func state(_ round: Int) -> [KeyValue] {
        (0..<400).map { KeyValue("key\($0)", $0 % 5 == round % 5 ? "changed in \(round): \($0)" : "value \($0)") }
    }

    func snapshotObject(_ id: String, in repository: BackupRepository) async throws -> [String: Any] {
        let name = BackupRepository.prefix + "snapshot." + id
        return try repository.snapshotObject(try await repository.readObjects([name])[0], name: name)
    }

    @Test func aSnapshotOfManyTreesNamesListsOfThemAndRestoresBackUpsAndPrunes() async throws {
        let vault = MemoryProvider(id: "vault")
        let store = try CloudStore(providers: [vault])
        var ids: [String] = []
        for round in 0..<2 {
            let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
            repository.treeIDsPerObject = 3
            let parent = try await repository.snapshots().last
            let session = try await repository.startBackup(after: parent)
            try await session.add(state(round))
            let result = try await session.finish(source: "app", pipeline: "p", time: Int64(round))
            ids.append(result.snapshotID)
            let object = try await snapshotObject(result.snapshotID, in: repository)
            // About 50 trees: 17 lists of 3, then 6, then 2.
            #expect(object["trees"] == nil && object["treeLevels"] as? Int == 3)
            #expect((object["treeLists"] as? [String])?.count == 2)
            #expect(result.keys == 400)
            if round == 1 { #expect(result.treesAdded < 50, "the unchanged runs are the first snapshot's trees") }
        }
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        _ = try await repository.prune(maxUnused: 0)
        let check = try await repository.verify(readData: 1)
        #expect(check.problems == [])
        for (round, id) in ids.enumerated() {
            #expect(
                try await repository.restore(snapshot: id).sorted { $0.key < $1.key }
                    == state(round).sorted { $0.key < $1.key })
        }
    }

    /// A snapshot object naming neither trees nor tree lists is damaged, not empty: a prune must not take it for one
    /// that needs nothing.
    @Test func aSnapshotNamingNoTreesIsDamaged() {
        for object: [String: Any] in [[:], ["treeLists": ["a"]], ["treeLists": ["a"], "treeLevels": 0]] {
            #expect(throws: CloudSyncError.self) { try SnapshotTrees(object, name: "s", provider: "vault") }
        }
    }
}
