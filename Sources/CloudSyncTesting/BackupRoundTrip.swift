import CloudSync
import CloudSyncBackup
import CloudSyncCrypto
import CloudSyncSodium

/// A backup repository's whole life on one provider: two backups, a restore of each, forget and prune, verify with
/// every pack read, and no key name among the provider's keys.
///
/// Run it from a provider's own tests with an empty provider; it returns one line per failed step (empty when all
/// pass), like ``ProviderConformanceSuite``: assert `failures.isEmpty` with the lines as the message. Packs are kept small so the prune has several to delete and rewrite.
public enum BackupRoundTrip {
    public static func run(on provider: any Provider, keys count: Int = 200, packBytes: Int = 8 << 10) async
        -> [String]
    {
        var failures: [String] = []
        func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { failures.append("backup round trip on \(provider.id): " + message()) }
        }
        do {
            let ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
            // No deadline: the suite loads the machine, and this checks what is stored, not how fast.
            var options = StoreOptions()
            options.timeout = nil
            let store = try CloudStore(providers: [provider], options: options)
            let source = (0..<count).map {
                KeyValue("secret.user\($0)", "value \($0) " + String(repeating: "v", count: 64))
            }
            func open() async throws -> BackupRepository {
                try await BackupRepository.open(
                    in: store, provider: provider.id, codec: ring, create: true, packBytes: packBytes)
            }
            func backUp(_ items: [KeyValue], time: Int64) async throws -> BackupResult {
                let session = try await open().startBackup()
                try await session.add(items)
                return try await session.finish(source: "app", pipeline: "round-trip", time: time, host: "test")
            }
            let first = try await backUp(source, time: 1_000)
            var changed = source
            for index in 0..<10 { changed[index] = KeyValue(changed[index].key, "changed \(index)") }
            changed.removeLast(5)
            changed += (0..<5).map { KeyValue("secret.added\($0)", "added \($0)") }
            let second = try await backUp(changed, time: 2_000)
            expect(second.new == 15, "the second backup stored \(second.new) values, not the 15 that changed")

            let sorted = { (items: [KeyValue]) in items.sorted { StoreKey.bytesPrecede($0.key, $1.key) } }
            let repository = try await open()
            expect(
                try await repository.restore(snapshot: first.snapshotID) == sorted(source),
                "the first snapshot does not restore the first state")
            expect(
                try await repository.restore(snapshot: second.snapshotID) == sorted(changed),
                "the second snapshot does not restore the second state")
            let names = try await store.listKeys(of: provider.id)
            expect(!names.contains { $0.contains("secret") }, "a key name appears among the provider's keys")

            var policy = KeepPolicy()
            policy.last = 1
            let forgotten = try await repository.forget(policy: policy)
            expect(forgotten.removed.map(\.id) == [first.snapshotID], "forget removed \(forgotten.removed.map(\.id))")
            let pruned = try await repository.prune(maxUnused: 0)
            expect(pruned.objectsDeleted > 0, "prune deleted nothing")
            let after = try await open()
            expect(
                try await after.restore(snapshot: second.snapshotID) == sorted(changed),
                "the kept snapshot does not restore after the prune")
            let check = try await after.verify(readData: 1)
            expect(check.problems.isEmpty, "verify found \(check.problems)")
        } catch {
            failures.append("backup round trip on \(provider.id): threw \(error)")
        }
        return failures
    }
}
