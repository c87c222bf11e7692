import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// Values larger than a pack, in content-defined chunks: cut within bounds, cut again the same way, an edit touching
/// only the chunks around it, and backups, restores and prunes of them.
@Suite struct ChunkingTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    static func text(bytes: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed)
        let words = ["theme", "dark", "light", "font", "size", "12", "{", "}", ":", ",", "\"", "user", "settings"]
        var out: [UInt8] = []
        out.reserveCapacity(bytes + 16)
        while out.count < bytes { out += Array(words.randomElement(using: &random)!.utf8) + [0x20] }
        return Array(out.prefix(bytes))
    }

    @Test func chunksStayWithinTheirBoundsAndAreCutTheSameWayAgain() {
        let chunker = ValueChunker(key: SecretBytes(copying: [UInt8](repeating: 1, count: 32)), largest: 4 << 20)
        #expect(chunker.minimum == 512 << 10 && chunker.average == 1 << 20 && chunker.maximum == 4 << 20)
        let value = Self.text(bytes: 24 << 20, seed: 1)
        let cuts = value.withUnsafeBytes { chunker.cuts($0) }
        #expect(cuts == value.withUnsafeBytes { chunker.cuts($0) })
        #expect(cuts.last == value.count)
        let sizes = zip(cuts, [0] + cuts).map { $0 - $1 }
        #expect(sizes.dropLast().allSatisfy { $0 >= chunker.minimum && $0 <= chunker.maximum }, "\(sizes)")
        // Content-defined: about one cut a MiB, not every 4 MiB.
        #expect(cuts.count >= 12 && cuts.count <= 40, "\(cuts.count) chunks: \(sizes)")
        // Another key cuts elsewhere.
        let other = ValueChunker(key: SecretBytes(copying: [UInt8](repeating: 2, count: 32)), largest: 4 << 20)
        #expect(value.withUnsafeBytes { other.cuts($0) } != cuts)
    }

    /// A pack's room scales every bound down together, so every chunk still fits the pack.
    @Test func aSmallPackScalesTheChunksDown() {
        let chunker = ValueChunker(key: SecretBytes(copying: [UInt8](repeating: 1, count: 32)), largest: 20_000)
        #expect(chunker.maximum == 20_000 && chunker.average == 8_192 && chunker.minimum == 4_096)
        let value = Self.text(bytes: 300_000, seed: 2)
        let cuts = value.withUnsafeBytes { chunker.cuts($0) }
        let sizes = zip(cuts, [0] + cuts).map { $0 - $1 }
        #expect(sizes.allSatisfy { $0 <= 20_000 })
    }

    @Test func aLargeValueBacksUpRestoresAndAnEditStoresOnlyTheChunksAroundIt() async throws {
        let vault = MemoryProvider(id: "vault")
        let store = try CloudStore(providers: [vault])
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        var value = Self.text(bytes: 20 << 20, seed: 3)
        let small = KeyValue("small", "a small value")
        let first = repository.startBackup()
        #expect(try await first.add([KeyValue("large", String(decoding: value, as: UTF8.self)), small]).isEmpty)
        let one = try await first.finish(source: "app", pipeline: "p", time: 1)
        #expect(one.keys == 2 && one.new == 2)

        value[value.count / 2] = UInt8(ascii: "#")
        let edited = String(decoding: value, as: UTF8.self)
        let second = repository.startBackup()
        try await second.add([KeyValue("large", edited), small])
        let two = try await second.finish(source: "app", pipeline: "p", time: 2)
        // Two chunks at most (each at most 4 MiB), the new list and tree, an index and the snapshot.
        #expect(two.bytesAdded < 2 * (4 << 20) * 4 / 3 + 100_000, "\(two.bytesAdded) bytes added")

        let reopened = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(try await reopened.restore(snapshot: two.snapshotID) == [KeyValue("large", edited), small])
        let restoredFirst = try await reopened.restore(snapshot: one.snapshotID)
        #expect(restoredFirst.first?.value.utf8.count == 20 << 20)
        #expect(try await reopened.verify(readData: 1).problems.isEmpty)
        #expect(try await reopened.snapshots().map(\.bytes) == [(20 << 20) + 13, (20 << 20) + 13])

        // Forgetting the first snapshot and pruning keeps every chunk the second needs.
        var keepLast = KeepPolicy()
        keepLast.last = 1
        _ = try await reopened.forget(policy: keepLast)
        _ = try await reopened.prune(maxUnused: 0)
        let pruned = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(try await pruned.restore(snapshot: two.snapshotID) == [KeyValue("large", edited), small])
        #expect(try await pruned.verify(readData: 1).problems.isEmpty)
    }
}
