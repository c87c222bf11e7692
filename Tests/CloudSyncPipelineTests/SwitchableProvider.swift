import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Synchronization

@testable import CloudSyncPipeline

/// A SQLite provider that can be switched off from the pipeline file.
///
/// With `down: true` it answers as a disk that is not mounted, for runs in which a provider cannot be listed. With
/// `reversed: true` it lists its keys in reverse order and says it does not list in key order, as a cloud whose
/// listing has its own order.
struct SwitchableProviderFactory: ProviderFactory {
    struct Configuration: Sendable {
        var path: String
        var down: Bool
        var reversed: Bool
        var refuses: String
        var unreadable: Bool
        /// Nonzero: every call yields a seeded number of times before and after it reaches the database.
        var schedule: Int64
        /// Nonzero: listing pages after this many fail, as a connection lost part-way.
        var listPages: Int64
        /// Nonzero: after this many writes the provider answers unavailable, and a manual clock moves past the
        /// store's memoised availability, so the next page asks again.
        var leavesAfterWrites: Int64
        /// Nonzero: before its read of this number, another writer changes every key the read asks for that the
        /// provider holds, as a process beside the run would.
        var editedBeforeRead: Int64
    }

    var type: String { "switchable" }
    var summary: String { "a SQLite database that can be switched off" }
    var fields: [ProviderField] {
        [
            ProviderField("path", .path, required: true, summary: "the database"),
            ProviderField("down", .boolean, defaultValue: "false", summary: "unavailable, as if not mounted"),
            ProviderField("reversed", .boolean, defaultValue: "false", summary: "lists in reverse key order"),
            ProviderField("refuses", .text, defaultValue: "", summary: "a key whose writes fail"),
            ProviderField("unreadable", .boolean, defaultValue: "false", summary: "every read of a value fails"),
            ProviderField(
                "schedule", .integer(minimum: 0, unit: ""), defaultValue: "0",
                summary: "a seed for the yields around each call (0: none)"),
            ProviderField(
                "listPages", .integer(minimum: 0, unit: ""), defaultValue: "0",
                summary: "listing pages that succeed before the rest fail (0: all succeed)"),
            ProviderField(
                "leavesAfterWrites", .integer(minimum: 0, unit: ""), defaultValue: "0",
                summary: "writes after which it answers unavailable (0: never)"),
            ProviderField(
                "editedBeforeRead", .integer(minimum: 0, unit: ""), defaultValue: "0",
                summary: "the read before which another writer changes the keys it asks for (0: none)"),
        ]
    }

    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(
            path: values.text("path") ?? "", down: values.boolean("down") ?? false,
            reversed: values.boolean("reversed") ?? false, refuses: values.text("refuses") ?? "",
            unreadable: values.boolean("unreadable") ?? false, schedule: values.integer("schedule") ?? 0,
            listPages: values.integer("listPages") ?? 0, leavesAfterWrites: values.integer("leavesAfterWrites") ?? 0,
            editedBeforeRead: values.integer("editedBeforeRead") ?? 0)
    }

    func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        var capabilities = SQLiteProvider.capabilities(maxValueBytes: nil)
        capabilities.listsInKeyOrder = !configuration.reversed
        return capabilities
    }

    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        SwitchableProvider(
            wrapped: try SQLiteProvider(id: context.providerID, path: configuration.path, metrics: context.metrics),
            down: configuration.down, reversed: configuration.reversed, refuses: configuration.refuses,
            unreadable: configuration.unreadable,
            scheduler: configuration.schedule == 0
                ? nil
                : SeededScheduler(seed: UInt64(configuration.schedule) &+ UInt64(context.providerID.utf8.count)),
            listingFails: configuration.listPages == 0 ? nil : ListingFailure(after: Int(configuration.listPages)),
            leaves: configuration.leavesAfterWrites == 0
                ? nil : Departure(afterWrites: Int(configuration.leavesAfterWrites), clock: context.clock),
            outsideWriter: configuration.editedBeforeRead == 0
                ? nil : OutsideWriter(beforeRead: Int(configuration.editedBeforeRead)))
    }
}

struct SwitchableProvider: ForwardingProvider {
    let wrapped: any Provider
    let down: Bool
    let reversed: Bool
    let refuses: String
    let unreadable: Bool
    /// Yields around every call, so the order in which concurrent reads, writes, listings and feed pages finish is
    /// part of a test's seed.
    let scheduler: SeededScheduler?
    let listingFails: ListingFailure?
    let leaves: Departure?
    let outsideWriter: OutsideWriter?

    var capabilities: ProviderCapabilities {
        var capabilities = wrapped.capabilities
        capabilities.listsInKeyOrder = !reversed
        return capabilities
    }

    /// `body` between two seeded pauses.
    private func scheduled<T>(_ body: () async throws -> T) async rethrows -> T {
        await scheduler?.pause()
        let result = try await body()
        await scheduler?.pause()
        return result
    }

    func availability() async -> Availability {
        await scheduled {
            if down { return .unavailable(.offline, "the test switched it off") }
            if leaves?.hasLeft == true { return .unavailable(.offline, "the test took it away part-way") }
            return await wrapped.availability()
        }
    }
    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try await scheduled {
            if down { throw CloudSyncError(.offline, "switched off", provider: id) }
            if unreadable { throw CloudSyncError(.provider, "the test refuses every read", provider: id) }
            if outsideWriter?.isDue() == true {
                let held = zip(keys, try await wrapped.get(keys)).filter { (try? $0.1.get()) != nil }.map(\.0)
                _ = try await wrapped.set(held.map { KeyValue($0, "changed outside the run") })
            }
            return try await wrapped.get(keys)
        }
    }
    func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try await scheduled {
            if down { throw CloudSyncError(.offline, "switched off", provider: id) }
            if unreadable { throw CloudSyncError(.provider, "the test refuses every read", provider: id) }
            return try await wrapped.getVersioned(keys)
        }
    }
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try await set(items, conditions: items.map { _ in nil }).map { $0.map { _ in () } }
    }
    func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws -> [Result<String?, CloudSyncError>] {
        try await scheduled {
            defer { leaves?.wrote() }
            let accepted = items.indices.filter { items[$0].key != refuses }
            var results = try await wrapped.set(accepted.map { items[$0] }, conditions: accepted.map { conditions[$0] })
                .makeIterator()
            return items.map { item in
                item.key == refuses
                    ? .failure(CloudSyncError(.provider, "the test refuses this key", provider: id, key: item.key))
                    : results.next() ?? .success(nil)
            }
        }
    }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await scheduled { try await wrapped.remove(keys) }
    }
    func remove(_ keys: [String], conditions: [WriteCondition?]) async throws -> [Result<Void, CloudSyncError>] {
        try await scheduled { try await wrapped.remove(keys, conditions: conditions) }
    }
    func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try await scheduled {
            if down { throw CloudSyncError(.offline, "switched off", provider: id) }
            try listingFails?.count(provider: id)
            guard reversed else { return try await wrapped.listKeys(after: cursor, limit: limit) }
            var keys = try await listEveryKey(of: wrapped, pageSize: 100)
            keys.reverse()
            let start = cursor.flatMap { Int($0) } ?? 0
            let end = min(start + limit, keys.count)
            return KeyPage(keys: Array(keys[start..<end]), nextCursor: end < keys.count ? String(end) : nil)
        }
    }
    func changeFeedCursor() async throws -> String? {
        try await scheduled { try await wrapped.changeFeedCursor() }
    }
    func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        try await scheduled { try await wrapped.changes(since: cursor, limit: limit) }
    }
}

/// Lets a number of listing pages through, then fails every later one.
final class ListingFailure: Sendable {
    private let pages = Mutex(0)
    let after: Int

    init(after: Int) { self.after = after }

    func count(provider: String) throws(CloudSyncError) {
        let page = pages.withLock {
            $0 += 1
            return $0
        }
        if page > after {
            throw CloudSyncError(.provider, "the test's listing fails past page \(after)", provider: provider)
        }
    }
}

/// Another writer that lands just before one numbered read of the provider.
final class OutsideWriter: Sendable {
    private let reads = Mutex(0)
    let beforeRead: Int

    init(beforeRead: Int) { self.beforeRead = beforeRead }

    /// Counts a read; true for the one the writer lands before.
    func isDue() -> Bool {
        reads.withLock {
            $0 += 1
            return $0 == beforeRead
        }
    }
}

/// Takes a provider away after a number of writes: from then on it answers unavailable, and a manual clock jumps past
/// the store's memoised availability answers, so the sync's next page asks again.
final class Departure: Sendable {
    private let writes = Mutex(0)
    let afterWrites: Int
    let clock: any StoreClock

    init(afterWrites: Int, clock: any StoreClock) {
        self.afterWrites = afterWrites
        self.clock = clock
    }

    var hasLeft: Bool { writes.withLock { $0 >= afterWrites } }

    func wrote() {
        let count = writes.withLock {
            $0 += 1
            return $0
        }
        if count == afterWrites { (clock as? ManualClock)?.advance(by: StoreOptions.defaultAvailabilityLifetime * 2) }
    }
}

/// Pauses for a seeded number of yields (none to four), so the tasks a sync runs side by side finish in an order the
/// seed picks: listing and feed pages read ahead, reads of several providers, writes delivered together.
final class SeededScheduler: Sendable {
    private let random: Mutex<SeededRandom>

    init(seed: UInt64) { random = Mutex(SeededRandom(seed: seed)) }

    func pause() async {
        let yields = random.withLock { Int.random(in: 0...4, using: &$0) }
        for _ in 0..<yields { await Task.yield() }
    }
}
