import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// The format 2 repository the release before zstd wrote (Tests/Fixtures/backup-format2: raw DEFLATE written by the
/// project's own compressor, now read through zlib): read as it is, then upgraded by a backup into it.
@Suite struct FormatTwoFixtureTests {
    static let fixture = Repository.root + "/Tests/Fixtures/backup-format2"

    /// The fixture's objects in a memory provider (a directory provider stores each object as a file of its name).
    func vault() throws -> (CloudStore, MemoryProvider) {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixture + "/repository")
        try #require(names.count == 7)
        let objects = try names.map { KeyValue($0, try String(contentsOfFile: Self.fixture + "/repository/" + $0)) }
        let vault = MemoryProvider(id: "vault", items: objects)
        return (try CloudStore(providers: [vault]), vault)
    }

    func codec() throws -> EnvelopeCodec {
        let text = try String(contentsOfFile: Self.fixture + "/format2.key").trimmingCharacters(
            in: .whitespacesAndNewlines)
        let key = try #require(Data(base64Encoded: text))
        return try EnvelopeCodec(keys: [.raw(id: "key1", SecretBytes(copying: [UInt8](key)))])
    }

    /// The values a directory of the fixture holds, sorted as restores sort.
    func values(in directory: String, replacing: [String: String] = [:], without: [String] = []) throws -> [KeyValue] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.fixture + "/" + directory)
        var values = try names.map { KeyValue($0, try String(contentsOfFile: Self.fixture + "/\(directory)/" + $0)) }
        values = values.filter { !without.contains($0.key) }.map { KeyValue($0.key, replacing[$0.key] ?? $0.value) }
        return values.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
    }

    @Test func itIsReadAsItIsThenUpgradedByABackupAndEverySnapshotStillRestores() async throws {
        let (store, vault) = try vault()
        let codec = try codec()
        let first = try values(
            in: "latest",
            replacing: ["settings.user-03": try String(contentsOfFile: Self.fixture + "/first/settings.user-03")],
            without: ["added"])
        let latest = try values(in: "latest")

        let reader = try await BackupRepository.open(in: store, provider: "vault", codec: codec, create: false)
        #expect(reader.format == 2)
        let snapshots = try await reader.snapshots()
        #expect(snapshots.map(\.keys) == [41, 42])
        #expect(try await reader.restore(snapshot: snapshots[0].id) == first)
        #expect(try await reader.restore(snapshot: snapshots[1].id) == latest)
        #expect(try await reader.verify(readData: 1).problems.isEmpty)

        let before = try await everyObject(vault)
        let writer = try await BackupRepository.open(in: store, provider: "vault", codec: codec, create: true)
        #expect(writer.format == BackupRepository.formatVersion)
        let third = latest + [KeyValue("new.large", String(repeating: #"{"theme":"dark"},"#, count: 20_000))]
        let session = writer.startBackup()
        try await session.add(third)
        let added = try await session.finish(source: "source", pipeline: "format2", time: Int64.max / 2)
        #expect(added.new == 1 && added.unchanged == 42)
        let after = try await everyObject(vault)
        for (name, text) in before where !name.hasSuffix(".config") { #expect(after[name] == text, "\(name) changed") }
        let new = after.filter { before[$0.key] == nil }
        #expect(!new.isEmpty && new.values.allSatisfy { $0.hasPrefix(RepositoryKeys.zstdMark) })

        let reopened = try await BackupRepository.open(in: store, provider: "vault", codec: codec, create: false)
        let all = try await reopened.snapshots()
        #expect(all.count == 3)
        #expect(try await reopened.restore(snapshot: all[0].id) == first)
        #expect(try await reopened.restore(snapshot: all[1].id) == latest)
        #expect(
            try await reopened.restore(snapshot: all[2].id) == third.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
        #expect(try await reopened.verify(readData: 1).problems.isEmpty)
    }

    func everyObject(_ vault: MemoryProvider) async throws -> [String: String] {
        let names = try await listEveryKey(of: vault)
        return Dictionary(uniqueKeysWithValues: zip(names, try await vault.get(names).map { try $0.get() ?? "" }))
    }
}
