/// A write waiting in the outbox to be retried on one provider.
///
/// Its description names the key, the operation and the provider but never the value.
public struct OutboxEntry: Sendable, Equatable, CustomStringConvertible {
    /// Increases with every enqueue; the lowest id is the oldest entry.
    public var id: Int64
    /// The key the write was for.
    public var key: String
    /// Whether it stores a value or removes the key.
    public var operation: FailedWrite.Operation
    /// The value exactly as the provider will store it (already encoded); nil for a remove.
    public var encodedValue: String?
    /// The provider it waits for, by id; the entry is retried there only.
    public var provider: String
    /// Attempts made so far, the original write included.
    public var attempts: Int
    /// When it is next due, in milliseconds since 1970 on the store's clock.
    public var nextAttemptAtMs: Int64
    /// When it was first queued, which `maxAge` counts from.
    public var enqueuedAtMs: Int64
    /// The code of the last failure (`ERR_OFFLINE`), for a "pending sync" view.
    public var lastErrorCode: String

    /// An entry as storage loads it back; the outbox makes new ones itself.
    public init(
        id: Int64, key: String, operation: FailedWrite.Operation, encodedValue: String?, provider: String,
        attempts: Int, nextAttemptAtMs: Int64, enqueuedAtMs: Int64, lastErrorCode: String
    ) {
        self.id = id
        self.key = key
        self.operation = operation
        self.encodedValue = encodedValue
        self.provider = provider
        self.attempts = attempts
        self.nextAttemptAtMs = nextAttemptAtMs
        self.enqueuedAtMs = enqueuedAtMs
        self.lastErrorCode = lastErrorCode
    }

    /// The key, operation, provider and schedule, never the value, so entries are safe to log.
    public var description: String {
        "\(operation) \"\(key)\" on \(provider) (attempt \(attempts), next at \(nextAttemptAtMs) ms, "
            + "last error \(lastErrorCode))"
    }
}

/// Where outbox entries are kept between retries, and across restarts when durable.
///
/// Synchronous on purpose: the write path queues an entry before the write call returns and has nowhere to await.
/// The outbox keeps at most one entry per (key, provider) and calls ``replace(_:)`` with the entry that supersedes
/// any other for that pair.
public protocol OutboxStorage: Sendable {
    /// Every stored entry, oldest first.
    func loadAll() throws -> [OutboxEntry]
    /// Stores `entry`, removing any other entry for the same key and provider, atomically.
    func replace(_ entry: OutboxEntry) throws
    /// Stores new attempt counts and times for existing entries.
    func update(_ entries: [OutboxEntry]) throws
    /// Removes entries by id; unknown ids are ignored.
    func delete(ids: [Int64]) throws
    /// Removes the entries `ids`, then stores each of `entries` as ``replace(_:)`` does, all at once: a durable
    /// storage makes it one transaction, so after a crash either all of it happened or none. The outbox calls it
    /// once for each batch of changes (every failed write of one store call).
    ///
    /// Storages that do not provide it get one that calls ``delete(ids:)`` and then ``replace(_:)`` for each entry,
    /// which is not atomic.
    func commit(storing entries: [OutboxEntry], deleting ids: [Int64]) throws
}

extension OutboxStorage {
    /// Removes `ids`, then stores each entry, one call at a time (not atomic).
    public func commit(storing entries: [OutboxEntry], deleting ids: [Int64]) throws {
        if !ids.isEmpty { try delete(ids: ids) }
        for entry in entries { try replace(entry) }
    }
}

/// Outbox storage in process memory: queued writes are lost when the process ends.
public final class InMemoryOutboxStorage: OutboxStorage {
    private struct Entries {
        var byID: [Int64: OutboxEntry] = [:]
        var idByPair: [OutboxPair: Int64] = [:]

        mutating func replace(_ entry: OutboxEntry) {
            if let old = idByPair.updateValue(entry.id, forKey: OutboxPair(entry)), old != entry.id {
                byID[old] = nil
            }
            byID[entry.id] = entry
        }

        mutating func delete(_ ids: [Int64]) {
            for id in ids {
                guard let entry = byID.removeValue(forKey: id) else { continue }
                if idByPair[OutboxPair(entry)] == id { idByPair[OutboxPair(entry)] = nil }
            }
        }
    }

    private let entries = Protected(Entries())

    /// An empty storage; what it holds is lost when the process ends.
    public init() {}

    /// Everything held, for the outbox to load at start.
    public func loadAll() throws -> [OutboxEntry] {
        entries.withLock { $0.byID.values.sorted { $0.id < $1.id } }
    }

    /// Adds `entry`, replacing one with the same id.
    public func replace(_ entry: OutboxEntry) throws {
        entries.withLock { entries in entries.replace(entry) }
    }

    /// Saves new schedules of existing entries.
    public func update(_ updated: [OutboxEntry]) throws {
        entries.withLock { entries in
            for entry in updated where entries.byID[entry.id] != nil { entries.byID[entry.id] = entry }
        }
    }

    /// Forgets the entries with these ids.
    public func delete(ids: [Int64]) throws {
        entries.withLock { entries in entries.delete(ids) }
    }

    /// Forgets `ids` and adds `storing`, under one lock: nobody sees part of it.
    public func commit(storing: [OutboxEntry], deleting ids: [Int64]) throws {
        entries.withLock { entries in
            entries.delete(ids)
            for entry in storing { entries.replace(entry) }
        }
    }
}

/// The (key, provider) pair an outbox entry is about; the outbox holds at most one entry per pair.
///
/// The key is compared by its bytes: canonically equivalent spellings are two pairs, as they are two keys.
struct OutboxPair: Hashable, Sendable {
    let key: StoreKey
    let provider: String

    init(key: String, provider: String) {
        self.key = StoreKey(key)
        self.provider = provider
    }

    init(_ entry: OutboxEntry) { self.init(key: entry.key, provider: entry.provider) }
}
