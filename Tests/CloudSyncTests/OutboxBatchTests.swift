import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

/// Outbox storage in memory that counts the calls that change it (each would be one transaction of a durable
/// storage) and can hold at most `capacity` entries, failing like a full disk beyond that.
final class CountingOutboxStorage: OutboxStorage {
    private let inner = InMemoryOutboxStorage()
    private let counts = Mutex((writes: 0, stored: 0))
    private let capacity: Int?

    init(capacity: Int? = nil) { self.capacity = capacity }

    /// Calls that changed (or tried to change) what is stored.
    var writes: Int { counts.withLock { $0.writes } }

    func loadAll() throws -> [OutboxEntry] { try inner.loadAll() }

    func replace(_ entry: OutboxEntry) throws { try commit(storing: [entry], deleting: []) }

    func update(_ entries: [OutboxEntry]) throws {
        counts.withLock { $0.writes += 1 }
        try inner.update(entries)
    }

    func delete(ids: [Int64]) throws { try commit(storing: [], deleting: ids) }

    func commit(storing entries: [OutboxEntry], deleting ids: [Int64]) throws {
        counts.withLock { $0.writes += 1 }
        if let capacity {
            var after = try inner.loadAll().filter { !ids.contains($0.id) }
            for entry in entries {
                after.removeAll { $0.key == entry.key && $0.provider == entry.provider }
                after.append(entry)
            }
            guard after.count <= capacity else { throw CloudSyncError(.quotaExceeded, "no space left on device") }
        }
        try inner.commit(storing: entries, deleting: ids)
    }
}

/// A store call whose writes fail on some providers queues all of them in one storage transaction, and queues
/// exactly what queueing them one call at a time would.
@Suite struct OutboxBatchTests {
    let clock = ManualClock()

    /// A store over fresh providers named `ids`, set up by `arrange`, with an outbox on `storage`.
    private func store(
        _ ids: [String], storage: CountingOutboxStorage, limits: Outbox.Limits = Outbox.Limits(),
        drops: DropLog? = nil, errors: ErrorLog? = nil, mirror: Bool = false,
        arrange: ([FaultInjectingProvider]) -> Void
    ) throws -> (CloudStore, Outbox) {
        let providers = ids.map { makeProvider($0) }
        arrange(providers)
        let outbox = try makeOutbox(limits, drops: drops, storage: storage)
        let store = try makeStore(providers) {
            $0.outbox = outbox
            $0.clock = clock
            $0.onError = errors?.handler
            if mirror { $0.writeMode = .mirror }
        }
        return (store, outbox)
    }

    /// Runs `items` through one `multiSet` and, on a twin store, one `set` per item; returns both stores' results.
    private func batchedAndOneByOne(
        _ ids: [String], items: [KeyValue], limits: Outbox.Limits = Outbox.Limits(), capacity: Int? = nil,
        mirror: Bool = false, before: [KeyValue] = [], arrange: @escaping ([FaultInjectingProvider]) -> Void
    ) async throws -> (batched: Run, oneByOne: Run) {
        var runs: [Run] = []
        for batched in [true, false] {
            let storage = CountingOutboxStorage(capacity: capacity)
            let drops = DropLog()
            let errors = ErrorLog()
            let (store, outbox) = try store(
                ids, storage: storage, limits: limits, drops: drops, errors: errors, mirror: mirror, arrange: arrange)
            for item in before { _ = try await store.set(item.value, forKey: item.key) }
            let writesBefore = storage.writes
            var results: [Result<WriteReceipt, CloudSyncError>] = []
            if batched {
                results = try await store.multiSet(items)
            } else {
                for item in items { results += try await store.multiSet([item]) }
            }
            runs.append(
                Run(
                    results: results, pending: store.pendingWrites().map(\.entry), stored: try storage.loadAll(),
                    drops: drops.entries, unkept: outbox.takeUnkept(), errors: errors.all,
                    storageWrites: storage.writes - writesBefore))
        }
        return (runs[0], runs[1])
    }

    struct Run {
        var results: [Result<WriteReceipt, CloudSyncError>]
        var pending: [OutboxEntry]
        var stored: [OutboxEntry]
        var drops: [String]
        var unkept: [KeyFailure]
        var errors: [CloudSyncError]
        var storageWrites: Int
    }

    private func expectSameOutcome(_ batched: Run, _ oneByOne: Run) {
        #expect(batched.results == oneByOne.results)
        #expect(batched.pending == oneByOne.pending)
        #expect(batched.stored == batched.pending, "the storage holds what the outbox holds")
        #expect(oneByOne.stored == oneByOne.pending)
        #expect(batched.drops == oneByOne.drops)
        #expect(batched.unkept == oneByOne.unkept)
        #expect(batched.errors == oneByOne.errors)
    }

    private let items = (0..<100).map { KeyValue("key.\($0)", "value \($0)") }

    @Test func oneFailedBatchIsQueuedInOneStorageTransaction() async throws {
        let (batched, oneByOne) = try await batchedAndOneByOne(["drive"], items: items) { providers in
            providers[0].fail(.set, with: offline)
        }
        #expect(batched.storageWrites == 1)
        #expect(oneByOne.storageWrites == 100)
        #expect(batched.pending.count == 100)
        #expect(batched.results.allSatisfy { (try? $0.get()) == WriteReceipt(queued: ["drive"]) })
        expectSameOutcome(batched, oneByOne)
    }

    @Test func aPartialMirrorWriteQueuesItsFailuresAndDropsSupersededEntriesTogether() async throws {
        // "key.1" already waits for drive; this batch reaches drive with it, so that entry goes in the same
        // transaction as the entries queued for s3.
        let (batched, oneByOne) = try await batchedAndOneByOne(
            ["drive", "s3"], items: items, mirror: true, before: [KeyValue("key.1", "older")]
        ) { providers in
            providers[0].fail(.set, with: offline, times: 1)
            for index in stride(from: 0, to: 100, by: 3) { providers[1].fail(key: "key.\(index)", with: offline) }
            providers[1].fail(key: "key.50", with: signedOut)
        }
        #expect(batched.storageWrites == 1)
        #expect(batched.pending.map(\.provider) == Array(repeating: "s3", count: 34))
        #expect(batched.errors.map(\.code) == [.notSignedIn])
        expectSameOutcome(batched, oneByOne)
    }

    /// The first provider is away, so a failover write lands on the second; a read would fall through the first's
    /// older copy before reaching it, so its removal waits in the outbox.
    @Test func removesOfOlderCopiesForAnUnreachableProviderAreQueuedTogether() async throws {
        let (batched, oneByOne) = try await batchedAndOneByOne(["drive", "s3"], items: items) { providers in
            providers[0].isAvailableNow = false
        }
        #expect(batched.storageWrites == 1)
        #expect(batched.pending.count == 100)
        #expect(batched.pending.allSatisfy { $0.operation == .remove && $0.provider == "drive" })
        expectSameOutcome(batched, oneByOne)
    }

    @Test func aBatchLargerThanTheQueueEvictsAsOneWriteAtATimeWould() async throws {
        // Two entries wait; the batch replaces one of them and adds four more to a queue of five.
        let before = [KeyValue("key.1", "older"), KeyValue("early", "x")]
        let (batched, oneByOne) = try await batchedAndOneByOne(
            ["drive"], items: Array(items.prefix(5)), limits: Outbox.Limits(maxEntries: 5), before: before
        ) { providers in
            providers[0].fail(.set, with: offline)
        }
        #expect(batched.storageWrites == 1)
        #expect(batched.drops == ["queueFull early"])
        #expect(batched.pending.map(\.key) == ["key.0", "key.1", "key.2", "key.3", "key.4"])
        expectSameOutcome(batched, oneByOne)
    }

    @Test func writesWithNoRetryLeftAreRefusedAsOneAtATimeWouldBe() async throws {
        let (batched, oneByOne) = try await batchedAndOneByOne(
            ["drive", "s3"], items: Array(items.prefix(3)), limits: Outbox.Limits(maxAttempts: 1), mirror: true
        ) { providers in
            for provider in providers { provider.fail(.set, with: offline) }
        }
        #expect(batched.results.allSatisfy { (try? $0.get()) == nil })
        #expect(batched.drops == ["tooManyAttempts key.0", "tooManyAttempts key.1", "tooManyAttempts key.2"])
        expectSameOutcome(batched, oneByOne)
    }

    @Test func whenTheStorageCannotTakeTheBatchEachWriteIsKeptOrNamedOnItsOwn() async throws {
        // Room for three entries: the batch's one transaction fails, and each write is then tried on its own, so
        // three are queued and the other two fail, each named, exactly as without batching.
        let (batched, oneByOne) = try await batchedAndOneByOne(
            ["drive"], items: Array(items.prefix(5)), capacity: 3
        ) { providers in
            providers[0].fail(.set, with: offline)
        }
        #expect(batched.pending.map(\.key) == ["key.0", "key.1", "key.2"])
        #expect(batched.unkept.map(\.key) == ["key.3", "key.4"])
        #expect(batched.results.map { (try? $0.get()) != nil } == [true, true, true, false, false])
        expectSameOutcome(batched, oneByOne)
    }
}

extension DropLog {
    /// Each drop as "reason key".
    var entries: [String] { zip(reasons, keys).map { "\($0.rawValue) \($1)" } }
}
