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
        var failures = Failures(provider: provider.id)
        do {
            let trip = try Trip(provider: provider, packBytes: packBytes)
            let source = (0..<count).map {
                KeyValue("secret.user\($0)", "value \($0) " + String(repeating: "v", count: 64))
            }
            let first = try await trip.backUp(source, time: 1_000)
            let changed = changedState(of: source)
            let second = try await trip.backUp(changed, time: 2_000)
            failures.expect(second.new == 15, "the second backup stored \(second.new) values, not the 15 that changed")

            let repository = try await trip.open()
            failures.expect(
                try await repository.restore(snapshot: first.snapshotID) == inKeyOrder(source),
                "the first snapshot does not restore the first state")
            failures.expect(
                try await repository.restore(snapshot: second.snapshotID) == inKeyOrder(changed),
                "the second snapshot does not restore the second state")
            let names = try await trip.store.listKeys(of: provider.id)
            failures.expect(!names.contains { $0.contains("secret") }, "a key name appears among the provider's keys")
            try await checkPrune(repository, trip, forgetting: first, keeping: second, items: changed, &failures)
        } catch {
            failures.lines.append("backup round trip on \(provider.id): threw \(error)")
        }
        return failures.lines
    }

    /// The lines of the failed steps, each naming the provider.
    private struct Failures {
        let provider: String
        var lines: [String] = []

        /// Adds `message` as a failure unless `condition` holds.
        mutating func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { lines.append("backup round trip on \(provider): " + message()) }
        }
    }

    /// The store and codec of the round trip, and its repository on the provider.
    private struct Trip {
        let store: CloudStore
        let provider: String
        let ring: EnvelopeCodec
        let packBytes: Int

        init(provider: any Provider, packBytes: Int) throws {
            ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
            // No deadline: the suite loads the machine, and this checks what is stored, not how fast.
            var options = StoreOptions()
            options.timeout = nil
            store = try CloudStore(providers: [provider], options: options)
            self.provider = provider.id
            self.packBytes = packBytes
        }

        /// The repository, opened anew (created the first time).
        func open() async throws -> BackupRepository {
            try await BackupRepository.open(
                in: store, provider: provider, codec: ring, create: true, packBytes: packBytes)
        }

        /// One backup of `items` at `time`.
        func backUp(_ items: [KeyValue], time: Int64) async throws -> BackupResult {
            let session = try await open().startBackup()
            try await session.add(items)
            return try await session.finish(source: "app", pipeline: "round-trip", time: time, host: "test")
        }
    }

    /// `source` with 10 values changed, 5 keys removed and 5 added.
    private static func changedState(of source: [KeyValue]) -> [KeyValue] {
        var changed = source
        for index in 0..<10 { changed[index] = KeyValue(changed[index].key, "changed \(index)") }
        changed.removeLast(5)
        changed += (0..<5).map { KeyValue("secret.added\($0)", "added \($0)") }
        return changed
    }

    /// `items` in the store's key order (bytewise), as a restore returns them.
    private static func inKeyOrder(_ items: [KeyValue]) -> [KeyValue] {
        items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
    }

    /// Checks that forgetting all but the last snapshot removes `first` alone and prune then deletes, and that
    /// `second` still restores `items` from the repository opened anew, which verify with every pack read finds sound.
    private static func checkPrune(
        _ repository: BackupRepository, _ trip: Trip, forgetting first: BackupResult, keeping second: BackupResult,
        items: [KeyValue], _ failures: inout Failures
    ) async throws {
        var policy = KeepPolicy()
        policy.last = 1
        let forgotten = try await repository.forget(policy: policy)
        failures.expect(
            forgotten.removed.map(\.id) == [first.snapshotID], "forget removed \(forgotten.removed.map(\.id))")
        let pruned = try await repository.prune(maxUnused: 0)
        failures.expect(pruned.objectsDeleted > 0, "prune deleted nothing")
        let after = try await trip.open()
        failures.expect(
            try await after.restore(snapshot: second.snapshotID) == inKeyOrder(items),
            "the kept snapshot does not restore after the prune")
        let check = try await after.verify(readData: 1)
        failures.expect(check.problems.isEmpty, "verify found \(check.problems)")
    }
}
