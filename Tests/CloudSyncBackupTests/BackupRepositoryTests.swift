import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncBackup

/// The repository core on a memory provider: what a backup stores, what it reveals, and what a restore gives back.
@Suite struct BackupRepositoryTests {
    let ring = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])

    func fixture() throws -> (CloudStore, MemoryProvider) {
        let vault = MemoryProvider(id: "vault")
        return (try CloudStore(providers: [vault]), vault)
    }

    /// Every stored value of the provider, as one string.
    func everything(_ provider: MemoryProvider) async throws -> (keys: [String], bytes: String) {
        let keys = try await listEveryKey(of: provider)
        let values = try await provider.get(keys).map { try $0.get() ?? "" }
        return (keys, values.joined())
    }

    @Test func aSecondBackupStoresOnlyWhatChangedAndEachSnapshotRestoresItsState() async throws {
        let (store, vault) = try fixture()
        // Settings as an app keeps them: a small JSON document per key.
        func settings(_ n: Int, theme: String) -> String {
            #"{"fontSize":\#(12 + n % 8),"n":\#(n),"theme":"\#(theme)","updatedAt":"2026-11-\#(10 + n % 18)T10:00:00Z"}"#
        }
        var state = (0..<1_000).map { KeyValue("prefs.user\($0).theme", settings($0, theme: "dark")) }
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let session = repository.startBackup()
        try await session.add(state)
        let first = try await session.finish(source: "app", pipeline: "nightly", time: 1_000)
        #expect(first.keys == 1_000 && first.new == 1_000 && first.unchanged == 0)
        let firstSize = try await everything(vault).bytes.utf8.count
        let firstState = state

        // 10 changed, 5 removed, 5 added.
        for index in 0..<10 { state[index] = KeyValue(state[index].key, settings(index, theme: "light")) }
        state.removeLast(5)
        state += (0..<5).map { KeyValue("prefs.new\($0)", "fresh \($0)") }
        let again = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        let next = again.startBackup()
        try await next.add(state)
        let second = try await next.finish(source: "app", pipeline: "nightly", time: 2_000)
        #expect(second.keys == 1_000 && second.new == 15 && second.unchanged == 985)
        let secondSize = try await everything(vault).bytes.utf8.count
        // Storing every value again would double it; the new pack, index, snapshot and changed trees are far less.
        #expect(secondSize - firstSize < firstSize / 5, "grew from \(firstSize) to \(secondSize)")

        // No key name, and no value, appears in any object's name or bytes: every key starts `prefs.`, every value
        // holds `updatedAt`, and the new values `fresh`. Each is searched with punctuation base64 never holds, so
        // sealed bytes cannot match by chance ("dark" alone turns up in about 3% of runs). (One search each: a search
        // per key would hold a thread of the test pool for seconds.)
        let stored = try await everything(vault)
        for secret in ["prefs.", "\"updatedAt\"", "\"dark\"", "fresh "] {
            #expect(!stored.bytes.contains(secret) && !stored.keys.contains { $0.contains(secret) }, "\(secret)")
        }

        let snapshots = try await again.snapshots()
        #expect(snapshots.map(\.id) == [first.snapshotID, second.snapshotID])
        #expect(snapshots.map(\.keys) == [1_000, 1_000])
        #expect(
            try await again.restore(snapshot: first.snapshotID)
                == firstState.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
        #expect(
            try await again.restore(snapshot: second.snapshotID)
                == state.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
    }

    @Test func aWrongKeyIsOneDecodeErrorNamingTheRepository() async throws {
        let (store, _) = try fixture()
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let session = repository.startBackup()
        try await session.add([KeyValue("k", "v")])
        _ = try await session.finish(source: "app", pipeline: "p", time: 1)
        let other = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
        await #expect {
            _ = try await BackupRepository.open(in: store, provider: "vault", codec: other, create: false)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .decode && error?.provider == "vault" && error?.message.contains("vault") == true
        }
    }

    /// `stored` (a sealed object, compressed or not) with one byte of its sealed bytes flipped.
    func flippingAByte(of stored: String, at position: (Int) -> Int, with bits: UInt8) -> String {
        let mark = RepositoryKeys.mark(of: stored)
        var sealed = [UInt8](Data(base64Encoded: String(stored.dropFirst(mark.count)))!)
        sealed[position(sealed.count)] ^= bits
        return mark + Data(sealed).base64EncodedString()
    }

    /// A repository holding one backup of 50 keys, its snapshot's id and its one pack's name.
    func oneBackupInOnePack() async throws -> (BackupRepository, MemoryProvider, snapshot: String, pack: String) {
        let (store, vault) = try fixture()
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let session = repository.startBackup()
        try await session.add((0..<50).map { KeyValue("key\($0)", "value \($0)") })
        let result = try await session.finish(source: "app", pipeline: "p", time: 1)
        let pack = try #require(
            try await listEveryKey(of: vault).first { $0.hasPrefix(BackupRepository.prefix + "data.") })
        return (repository, vault, result.snapshotID, pack)
    }

    @Test func aFlippedByteInAnyObjectIsNamedWhenItIsRead() async throws {
        let (repository, vault, snapshot, pack) = try await oneBackupInOnePack()
        let stored = try #require(try await vault.get([pack])[0].get())
        _ = try await vault.set([KeyValue(pack, flippingAByte(of: stored, at: { $0 / 2 }, with: 0x01))])
        await #expect {
            _ = try await repository.restore(snapshot: snapshot)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .decode && error?.key == pack
        }
    }

    /// A pack or index that authenticates but opens to more than any writer makes (only a holder of the key could
    /// make one) is named as damaged and never inflated: before format 3 the bound was 1 GiB for every object.
    @Test func aPackThatOpensPastItsKindsBoundIsNamedAndNotInflated() async throws {
        let (repository, vault, snapshot, pack) = try await oneBackupInOnePack()
        let huge = [UInt8](repeating: 0, count: RepositoryKeys.maxPackBytes + 1)
        _ = try await vault.set([KeyValue(pack, try repository.keys.seal(huge, name: pack))])
        await #expect {
            _ = try await repository.restore(snapshot: snapshot)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .decode && error?.key == pack && error?.message.contains("opens to more than") == true
        }
        // A snapshot may be larger: its bound is the general one.
        #expect(RepositoryKeys.maxBytes(of: BackupRepository.prefix + "snapshot.x") == RepositoryKeys.maxObjectBytes)
        #expect(RepositoryKeys.maxBytes(of: BackupRepository.prefix + "index.x") == RepositoryKeys.maxPackBytes)
    }

    @Test func aReKeyedCodecRewrapsOnlyTheConfigSoTheOldKeyCanLeaveTheRing() async throws {
        let (store, vault) = try fixture()
        let old = SecretBytes(copying: SecureRandom.bytes(count: 32))
        let new = SecretBytes(copying: SecureRandom.bytes(count: 32))
        let before = try EnvelopeCodec(keys: [.raw(id: "old", old)])
        let repository = try await BackupRepository.open(in: store, provider: "vault", codec: before, create: true)
        let session = repository.startBackup()
        try await session.add((0..<100).map { KeyValue("k\($0)", "v\($0)") })
        let snapshot = try await session.finish(source: "app", pipeline: "p", time: 1).snapshotID
        let objects = try await listEveryKey(of: vault).filter { !$0.hasSuffix(".config") }
        let stored = try await vault.get(objects).map { try $0.get() }

        // The ring gains a new current key; the next writer rewraps the config and touches nothing else.
        let rotated = try EnvelopeCodec(keys: [.raw(id: "new", new), .raw(id: "old", old)])
        _ = try await BackupRepository.open(in: store, provider: "vault", codec: rotated, create: true)
        #expect(try await vault.get(objects).map { try $0.get() } == stored)
        let config = try #require(try await vault.get([BackupRepository.prefix + "config"])[0].get())
        #expect(config.contains("cs1:new:"))

        let newOnly = try EnvelopeCodec(keys: [.raw(id: "new", new)])
        let reopened = try await BackupRepository.open(in: store, provider: "vault", codec: newOnly, create: false)
        #expect(try await reopened.restore(snapshot: snapshot).count == 100)
    }

    @Test func aRepositoryOfANewerFormatIsRefusedSayingWhatToDo() async throws {
        let (store, vault) = try fixture()
        _ = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        let name = BackupRepository.prefix + "config"
        let config = try #require(try await vault.get([name])[0].get())
        let current = BackupRepository.formatVersion
        #expect(config.contains(#""format":\#(current)"#))
        _ = try await vault.set([
            KeyValue(
                name, config.replacingOccurrences(of: #""format":\#(current)"#, with: #""format":\#(current + 1)"#))
        ])
        await #expect {
            _ = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .config && error?.message.contains("format \(current + 1)") == true
                && error?.message.contains("newer cloudsync") == true
        }
    }

    /// Hexadecimal values, as the bench backs up: 4 bits of information a byte.
    func hexValues(_ count: Int, seed: UInt64) -> [KeyValue] {
        var random = SeededRandom(seed: seed)
        let digits = Array("0123456789abcdef")
        return (0..<count).map { index in
            KeyValue("key\(index)", String((0..<1_024).map { _ in digits.randomElement(using: &random)! }))
        }
    }

    /// A repository made before compression (format 1) becomes the current format when a writer opens it: what it held
    /// is left as it was and still read, what is written from then on is zstd, and a reader changes nothing.
    @Test func aFormatOneRepositoryIsUpgradedByItsNextWriterAndKeepsWhatItHeld() async throws {
        let (store, vault) = try fixture()
        let created = try await BackupRepository.open(
            in: store, provider: "vault", codec: ring, create: true, newFormat: 1)
        #expect(created.format == 1)
        let values = hexValues(300, seed: 3)
        let session = created.startBackup()
        try await session.add(values)
        let first = try await session.finish(source: "app", pipeline: "p", time: 1).snapshotID
        let before = try await storedObjects(vault)
        #expect(!before.isEmpty && before.values.allSatisfy { RepositoryKeys.mark(of: $0).isEmpty })
        let formatOneBytes = before.values.reduce(0) { $0 + $1.utf8.count }

        let reader = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(reader.format == 1)
        #expect(try await configText(vault).contains(#""format":1"#))

        let writer = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: true)
        #expect(writer.format == BackupRepository.formatVersion)
        #expect(try await configText(vault).contains(#""format":\#(BackupRepository.formatVersion)"#))
        let next = writer.startBackup()
        let changed = hexValues(10, seed: 4) + values.dropFirst(10)
        try await next.add(changed)
        let second = try await next.finish(source: "app", pipeline: "p", time: 2).snapshotID
        let after = try await storedObjects(vault)
        for (name, text) in before { #expect(after[name] == text, "\(name) was rewritten") }
        let added = after.filter { before[$0.key] == nil }
        #expect(!added.isEmpty && added.values.allSatisfy { $0.hasPrefix(RepositoryKeys.zstdMark) })

        let reopened = try await BackupRepository.open(in: store, provider: "vault", codec: ring, create: false)
        #expect(try await reopened.restore(snapshot: first) == values.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
        #expect(
            try await reopened.restore(snapshot: second) == changed.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
        #expect(try await reopened.verify(readData: 1).problems.isEmpty)

        // The same first backup into a new repository: hexadecimal, compressed then base64, takes about 0.51 × 4/3.
        let (fresh, freshVault) = try fixture()
        let compressed = try await BackupRepository.open(in: fresh, provider: "vault", codec: ring, create: true)
        let freshSession = compressed.startBackup()
        try await freshSession.add(values)
        _ = try await freshSession.finish(source: "app", pipeline: "p", time: 1)
        let compressedBytes = try await storedObjects(freshVault).values.reduce(0) { $0 + $1.utf8.count }
        #expect(Double(compressedBytes) < Double(formatOneBytes) * 0.55, "\(compressedBytes) beside \(formatOneBytes)")
    }

    /// The mark is bound to the sealed bytes: taken off a compressed object, or put on one that is not, the object
    /// no longer authenticates, rather than being read the wrong way.
    @Test func aCompressionMarkTakenOffOrPutOnIsADecodeError() async throws {
        let (repository, vault, snapshot, pack) = try await oneBackupInOnePack()
        let stored = try #require(try await vault.get([pack])[0].get())
        #expect(stored.hasPrefix(RepositoryKeys.zstdMark))
        let unmarked = String(stored.dropFirst(RepositoryKeys.zstdMark.count))
        for tampered in [
            unmarked, RepositoryKeys.zstdMark + RepositoryKeys.zstdMark + unmarked,
            RepositoryKeys.deflateMark + unmarked,
        ] {
            _ = try await vault.set([KeyValue(pack, tampered)])
            await #expect {
                _ = try await repository.restore(snapshot: snapshot)
            } throws: { error in
                let error = error as? CloudSyncError
                return error?.code == .decode && error?.key == pack
            }
        }
        let plain = RepositoryKeys(data: repository.keys.data, id: repository.keys.id, compression: .none)
        let uncompressed = try plain.seal(Array("some bytes".utf8), name: pack)
        #expect(try plain.open(uncompressed, name: pack, repository: "vault") == Array("some bytes".utf8))
        #expect {
            _ = try plain.open(RepositoryKeys.zstdMark + uncompressed, name: pack, repository: "vault")
        } throws: { error in
            (error as? CloudSyncError)?.message.contains("does not authenticate") == true
        }
    }

    func storedObjects(_ vault: MemoryProvider) async throws -> [String: String] {
        let names = try await listEveryKey(of: vault).filter { !$0.hasSuffix(".config") && !$0.contains(".lock.") }
        return Dictionary(uniqueKeysWithValues: zip(names, try await vault.get(names).map { try $0.get() ?? "" }))
    }

    func configText(_ vault: MemoryProvider) async throws -> String {
        try #require(try await vault.get([BackupRepository.prefix + "config"])[0].get())
    }

    /// An object that authenticates but does not decompress as its mark says (written so by a faulty writer holding
    /// the key) is `ERR_DECODE` naming it, not a crash or a wrong value, whichever the mark.
    @Test(arguments: [RepositoryKeys.zstdMark, RepositoryKeys.deflateMark])
    func anObjectThatAuthenticatesButDoesNotDecompressIsNamed(mark: String) async throws {
        let (repository, vault, snapshot, pack) = try await oneBackupInOnePack()
        // Marked compressed and sealed as the writer seals, but holding bytes no decompressor reads.
        let sealed = try Array("neither zstd nor deflate".utf8).withUnsafeBufferPointer { bytes in
            try XChaCha20Poly1305.sealCombined(
                bytes, key: repository.keys.data, associatedData: Array((mark + pack).utf8))
        }
        _ = try await vault.set([KeyValue(pack, mark + Data(sealed).base64EncodedString())])
        await #expect {
            _ = try await repository.restore(snapshot: snapshot)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .decode && error?.key == pack
                && error?.message.contains("does not decompress") == true
        }
    }

    /// The compression level a writer is given is the one its objects are made at: the strongest stores JSON in
    /// fewer bytes than the fastest, and each restores the same.
    @Test func theCompressionLevelAWriterIsGivenIsUsed() async throws {
        var sizes: [Int32: Int] = [:]
        let values = (0..<2_000).map {
            KeyValue("user\($0)", #"{"theme":"\#($0 % 3 == 0 ? "dark" : "light")","n":\#($0),"tags":["a","b"]}"#)
        }
        for level: Int32 in [1, 19] {
            let (store, vault) = try fixture()
            let repository = try await BackupRepository.open(
                in: store, provider: "vault", codec: ring, create: true, compressionLevel: level)
            #expect(repository.keys.compression == .zstd(level: level))
            let session = repository.startBackup()
            try await session.add(values)
            let snapshot = try await session.finish(source: "app", pipeline: "p", time: 1).snapshotID
            sizes[level] = try await storedObjects(vault).values.reduce(0) { $0 + $1.utf8.count }
            #expect(
                try await repository.restore(snapshot: snapshot)
                    == values.sorted { StoreKey.bytesPrecede($0.key, $1.key) })
        }
        #expect(sizes[19]! < sizes[1]!, "\(sizes)")
    }

    /// An object that would not shrink is sealed as it is, unmarked, and read back the same.
    @Test func anObjectThatDoesNotShrinkIsStoredUncompressed() throws {
        let keys = RepositoryKeys.random(format: BackupRepository.formatVersion)
        var random = SeededRandom(seed: 8)
        let noise = (0..<10_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let text = Array(String(repeating: "theme=dark ", count: 1_000).utf8)
        let sealedNoise = try keys.seal(noise, name: "n")
        let sealedText = try keys.seal(text, name: "t")
        #expect(RepositoryKeys.mark(of: sealedNoise).isEmpty)
        #expect(sealedText.hasPrefix(RepositoryKeys.zstdMark))
        #expect(try keys.open(sealedNoise, name: "n", repository: "vault") == noise)
        #expect(try keys.open(sealedText, name: "t", repository: "vault") == text)
    }
}
