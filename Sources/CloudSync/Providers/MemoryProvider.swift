import Foundation

/// A provider that keeps values in process memory: the `memory` provider type, dry runs, and tests.
public final class MemoryProvider: Provider {
    private struct Contents {
        var values: [StoreKey: String] = [:]
        /// Each key's sequence number of its last store: its version tag.
        var storedAt: [StoreKey: Int] = [:]
        /// Each key's time of its last store by the provider's clock, kept only when it has one.
        var modifiedAt: [StoreKey: Int64] = [:]
        /// Every key, sorted, so listing pages are a binary search and a slice.
        var sortedKeys: [String] = []
        var usedBytes: Int64 = 0
        /// The change feed: (sequence number, key, removed), oldest first, at most `changeLogLimit` entries.
        var changeLog: [(sequence: Int, change: KeyChange)] = []
        var changeLogStart = 0
        var lastSequence = 0
        /// The newest sequence number pruned from the log: a cursor before it is expired.
        var prunedThrough = 0
        var changeLogLimit = 100_000

        mutating func logChange(_ key: String, removed: Bool) {
            lastSequence += 1
            changeLog.append((lastSequence, KeyChange(key: key, removed: removed)))
            if changeLog.count - changeLogStart > changeLogLimit {
                prunedThrough = changeLog[changeLogStart].sequence
                changeLogStart += 1
                if changeLogStart > changeLogLimit {
                    changeLog.removeFirst(changeLogStart)
                    changeLogStart = 0
                }
            }
        }

        func insertionIndex(of key: String) -> Int {
            var low = 0
            var high = sortedKeys.count
            while low < high {
                let middle = (low + high) / 2
                if StoreKey.bytesPrecede(sortedKeys[middle], key) { low = middle + 1 } else { high = middle }
            }
            return low
        }

        mutating func store(_ value: String, forKey key: String) {
            logChange(key, removed: false)
            storedAt[StoreKey(key)] = lastSequence
            if let old = values.updateValue(value, forKey: StoreKey(key)) {
                usedBytes -= Int64(old.utf8.count)
            } else {
                sortedKeys.insert(key, at: insertionIndex(of: key))
                usedBytes += Int64(key.utf8.count)
            }
            usedBytes += Int64(value.utf8.count)
        }

        mutating func remove(_ key: String) {
            guard let old = values.removeValue(forKey: StoreKey(key)) else { return }
            storedAt[StoreKey(key)] = nil
            modifiedAt[StoreKey(key)] = nil
            logChange(key, removed: true)
            sortedKeys.remove(at: insertionIndex(of: key))
            usedBytes -= Int64(key.utf8.count + old.utf8.count)
        }
    }

    /// The provider's id in the store (`memory` unless given).
    public let id: String
    /// What it declares; its cap is enforced, so tests can exercise size routing.
    ///
    /// It always lists in key order, whatever it is given.
    public let capabilities: ProviderCapabilities
    /// Space this provider pretends to have, in bytes of keys and values; nil for unlimited.
    public let totalBytes: Int64?
    /// Counts every call as one request.
    public let metrics: ProviderMetrics
    private let contents = Protected(Contents())
    /// Names this instance in its change-feed cursors and version tags, so another instance's cursor is expired and
    /// its tags differ, not misread.
    private let feedEpoch = UUID().uuidString
    /// The provider's own clock, when it has one: its listings then give each key's modification time by it, as a
    /// service's listings give times by the service's clock (which a test can set apart from its writers').
    private let clock: (any StoreClock)?

    /// A provider holding `items` from the start (a demo's data, a test's fixture).
    ///
    /// Its change feed keeps the last `changeLogLimit` changes. With a `clock`, its listings give modification times
    /// by it.
    public init(
        id: String = "memory", capabilities: ProviderCapabilities = .init(), totalBytes: Int64? = nil,
        items: [KeyValue] = [], metrics: ProviderMetrics = ProviderMetrics(), changeLogLimit: Int = 100_000,
        clock: (any StoreClock)? = nil
    ) {
        self.id = id
        self.clock = clock
        var capabilities = capabilities
        capabilities.listsInKeyOrder = true
        capabilities.cursorIsKey = true
        capabilities.conditionalWrites = true
        self.capabilities = capabilities
        self.totalBytes = totalBytes
        self.metrics = metrics
        contents.withLock { contents in
            contents.changeLogLimit = max(1, changeLogLimit)
            for item in items { contents.store(item.value, forKey: item.key) }
        }
    }

    /// The change feed's position now: this instance and its last change's sequence number.
    public func changeFeedCursor() async throws -> String? {
        "\(feedEpoch):\(contents.withLock { $0.lastSequence })"
    }

    /// Keys changed after `cursor`, oldest first; expired for another instance's cursor or one the log was pruned
    /// past.
    public func changes(since cursor: String, limit: Int) async throws -> ChangeFeedAnswer {
        metrics.recordRequest()
        let parts = cursor.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, parts[0] == feedEpoch, let after = Int(parts[1]) else {
            return .expired("the cursor belongs to another memory provider (memory does not outlive its process)")
        }
        return contents.withLock { contents in
            guard after >= contents.prunedThrough, after <= contents.lastSequence else {
                return .expired("the change log no longer reaches back to the cursor")
            }
            var index = contents.changeLogStart + max(0, after - contents.prunedThrough)
            // The log is dense: entry sequence numbers follow each other from prunedThrough + 1.
            var changes: [KeyChange] = []
            var last = after
            while index < contents.changeLog.count, changes.count < max(limit, 1) {
                changes.append(contents.changeLog[index].change)
                last = contents.changeLog[index].sequence
                index += 1
            }
            return .changes(
                ChangePage(
                    changes: changes, cursor: "\(feedEpoch):\(last)", hasMore: index < contents.changeLog.count))
        }
    }

    /// Always available: process memory cannot sign out or go offline.
    public func availability() async -> Availability { .available }

    /// Values of `keys`, positionally.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        let values = contents.withLock { contents in keys.map { contents.values[StoreKey($0)] } }
        metrics.recordRequest(bytesRead: values.reduce(0) { $0 + ($1?.utf8.count ?? 0) })
        return values.map { .success($0) }
    }

    /// Stores each item, refusing per key what is above the declared cap or past `totalBytes`, as a real provider
    /// would.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        store(items, conditions: nil, tagged: false).map { $0.map { _ in () } }
    }

    /// Stores each item whose condition holds, checked under the provider's lock, refusing what ``set(_:)``
    /// refuses; each success carries the stored value's version tag.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        store(items, conditions: conditions, tagged: true)
    }

    /// Stores `items` under their conditions (nil: none), answering each stored value's tag when `tagged`.
    private func store(_ items: [KeyValue], conditions: [WriteCondition?]?, tagged: Bool)
        -> [Result<String?, CloudSyncError>]
    {
        let results = contents.withLock { contents in
            items.indices.map { index -> Result<String?, CloudSyncError> in
                let item = items[index]
                if let condition = conditions?[index], !condition.holds(forTag: version(of: item.key, in: contents)) {
                    return .failure(condition.unmet(key: item.key, provider: id))
                }
                if let cap = capabilities.maxValueBytes, item.value.utf8.count > cap {
                    return .failure(
                        CloudSyncError(
                            .payloadTooLarge, "the value is \(item.value.utf8.count) bytes; this provider takes \(cap)",
                            provider: id, key: item.key))
                }
                if let totalBytes {
                    // Replacing a value grows by the difference; a new key also brings the key's bytes.
                    let growth =
                        contents.values[StoreKey(item.key)].map { Int64(item.value.utf8.count - $0.utf8.count) }
                        ?? Int64(item.key.utf8.count + item.value.utf8.count)
                    if contents.usedBytes + growth > totalBytes {
                        return .failure(
                            CloudSyncError(
                                .quotaExceeded, "this provider is limited to \(totalBytes) bytes and is full",
                                provider: id, key: item.key))
                    }
                }
                contents.store(item.value, forKey: item.key)
                if let clock { contents.modifiedAt[StoreKey(item.key)] = clock.nowMilliseconds() }
                return .success(tagged ? version(of: item.key, in: contents) : nil)
            }
        }
        metrics.recordWrite(items, results.map { $0.map { _ in () } })
        return results
    }

    /// Removes each key; a missing key is a success, as the provider contract asks.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try await remove(keys, conditions: keys.map { _ in nil })
    }

    /// Removes each key whose condition holds, checked under the provider's lock; a missing key is a success.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        metrics.recordRequest()
        return contents.withLock { contents in
            zip(keys, conditions).map { key, condition in
                if let condition, let current = version(of: key, in: contents), !condition.holds(forTag: current) {
                    return .failure(condition.unmet(key: key, provider: id))
                }
                contents.remove(key)
                return .success(())
            }
        }
    }

    /// Values of `keys` with the version tags ``listKeys(after:limit:)`` gives them, positionally.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        let values = contents.withLock { contents in
            keys.map { key in
                contents.values[StoreKey(key)].map { VersionedValue($0, version: version(of: key, in: contents)) }
            }
        }
        metrics.recordRequest(bytesRead: values.reduce(0) { $0 + ($1?.value.utf8.count ?? 0) })
        return values.map { .success($0) }
    }

    /// `key`'s version tag: this instance and the sequence number of its last store; nil when it is not stored.
    private func version(of key: String, in contents: Contents) -> String? {
        contents.storedAt[StoreKey(key)].map { "\(feedEpoch):\($0)" }
    }

    /// Keys in bytewise order after `cursor`, so pages are stable while other tasks write.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        guard capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: id)
        }
        metrics.recordRequest()
        return contents.withLock { contents in
            var start = cursor.map { contents.insertionIndex(of: $0) } ?? 0
            if let cursor, start < contents.sortedKeys.count, StoreKey.bytesEqual(contents.sortedKeys[start], cursor) {
                start += 1
            }
            let end = min(start + max(limit, 1), contents.sortedKeys.count)
            let keys = Array(contents.sortedKeys[start..<end])
            // Tags name this instance too: another process's memory provider starts counting again.
            let versions = keys.map { version(of: $0, in: contents) }
            return KeyPage(
                keys: keys, nextCursor: end < contents.sortedKeys.count ? keys.last : nil, versions: versions,
                modified: clock.map { _ in keys.map { contents.modifiedAt[StoreKey($0)] } })
        }
    }

    /// How many keys it holds.
    public func keyCount() async throws -> Int? { contents.withLock { $0.sortedKeys.count } }

    /// Bytes of keys and values held, against `totalBytes`; nil without a total, because memory has no real limit
    /// to report.
    public func quota() async throws -> ProviderQuota? {
        guard capabilities.reportsQuota else { return nil }
        metrics.recordRequest()
        return ProviderQuota(usedBytes: contents.withLock { $0.usedBytes }, totalBytes: totalBytes)
    }
}

/// The `memory` provider type: values in process memory, for demos, dry runs and tests.
public struct MemoryProviderFactory: ProviderFactory {
    /// The keys and values a memory provider starts with.
    public struct Configuration: Sendable {
        /// Keys and values it starts with, in file order.
        public var items: [KeyValue]
    }

    /// The factory; register it in a ``ProviderRegistry``.
    public init() {}

    /// The `type` pipeline files name.
    public var type: String { "memory" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String { "process memory, gone when the run ends: demos, dry runs and tests" }
    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [ProviderField("items", .textMap, summary: "keys and values the provider starts with")]
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(items: values.textMap("items") ?? [])
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities() }

    /// Makes the provider with the context's id, clock and metrics.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        MemoryProvider(
            id: context.providerID, capabilities: capabilities(of: configuration), items: configuration.items,
            metrics: context.metrics)
    }
}
