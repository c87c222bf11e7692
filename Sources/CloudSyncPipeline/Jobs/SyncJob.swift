import CloudSync
import CloudSyncSQLite
import Foundation

/// The most deletions a sync job may make before it stops, from its `maxDeletes`.
public enum DeleteLimit: Sendable, Equatable {
    /// At most this many keys.
    case count(Int)
    /// At most this percentage of the keys the last sync left.
    case percent(Double)

    /// The default: half the keys, as rclone's bisync allows.
    public static let standard = DeleteLimit.percent(50)

    /// The limit as written in a pipeline file: a whole number, or a percentage like `"50%"`.
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("%") {
            guard let value = Double(trimmed.dropLast()), value >= 0, value <= 100 else { return nil }
            self = .percent(value)
        } else {
            guard let value = Int(trimmed), value >= 0 else { return nil }
            self = .count(value)
        }
    }

    /// How many deletions it allows when the last sync left `snapshotKeys` keys.
    func allowed(snapshotKeys: Int) -> Int {
        switch self {
        case .count(let count): return count
        case .percent(let percent): return Int((Double(snapshotKeys) * percent / 100).rounded(.down))
        }
    }

    /// As written: `50%` or `1000`.
    public var description: String {
        switch self {
        case .count(let count): return "\(count)"
        case .percent(let percent):
            return percent == percent.rounded() ? "\(Int(percent))%" : "\(percent)%"
        }
    }
}

/// One provider's keys in bytewise order, a page at a time: straight from its listing when it lists in key order,
/// else from a temporary table its whole listing was sorted into first.
final class OrderedKeys {
    let id: String
    private var buffer: [String] = []
    private var index = 0
    private var cursor: String?
    private var finished = false
    private var last: String?
    private var spill: KeySpill?
    /// Why its listing stopped short; its keys are unknown from there on.
    private(set) var error: CloudSyncError?

    init(id: String) { self.id = id }

    /// The next key, or nil when the listing is used up (or failed); call ``refill(from:pageSize:)`` first when
    /// ``needsRefill`` says so.
    var head: String? { index < buffer.count ? buffer[index] : nil }
    var needsRefill: Bool { index >= buffer.count && !finished }
    func advance() { index += 1 }

    /// Sorts the listing of a provider that does not list in key order into a temporary table.
    func spillListing(from store: CloudStore, pageSize: Int) async {
        do throws(CloudSyncError) {
            let spill = try KeySpill()
            self.spill = spill
            var cursor: String?
            repeat {
                let page = try await store.keyPage(of: id, after: cursor, limit: pageSize)
                try spill.add(page.keys)
                guard page.nextCursor == nil || page.nextCursor != cursor else {
                    throw CloudSyncError(
                        .provider, "listing returned the same cursor twice; it would never end", provider: id)
                }
                cursor = page.nextCursor
            } while cursor != nil
        } catch {
            fail(error)
        }
    }

    /// How reading a change feed ended.
    enum FeedOutcome {
        /// Every change was read; the feed continues from this cursor.
        case read(cursor: String)
        /// The provider refused the cursor, for this reason.
        case expired(String)
        /// Reading failed: see ``error``.
        case failed
    }

    /// Reads the provider's change feed (through the store, under its deadline) from `cursor` to its end into a
    /// temporary table, so its changed keys come back in bytewise order, each once.
    func spillChanges(from store: CloudStore, since cursor: String, pageSize: Int) async -> FeedOutcome {
        do throws(CloudSyncError) {
            let spill = try KeySpill()
            var cursor = cursor
            while true {
                switch try await store.changes(of: id, since: cursor, limit: pageSize) {
                case .expired(let reason): return .expired(reason)
                case .changes(let page):
                    try spill.add(page.changes.map(\.key))
                    guard !page.hasMore else {
                        guard page.cursor != cursor else {
                            throw CloudSyncError(
                                .provider, "its change feed returned the same cursor twice; it would never end",
                                provider: id)
                        }
                        cursor = page.cursor
                        continue
                    }
                    self.spill = spill
                    return .read(cursor: page.cursor)
                }
            }
        } catch {
            fail(error)
            return .failed
        }
    }

    /// Reads the next page.
    func refill(from store: CloudStore, pageSize: Int) async {
        buffer = []
        index = 0
        do throws(CloudSyncError) {
            if let spill {
                buffer = try spill.keys(after: cursor, limit: pageSize)
                cursor = buffer.last
                finished = buffer.count < pageSize
                return
            }
            let page = try await store.keyPage(of: id, after: cursor, limit: pageSize)
            for key in page.keys {
                if let last, !StoreKey.bytesPrecede(last, key) {
                    throw CloudSyncError(
                        .provider,
                        "listed \"\(key)\" after \"\(last)\": its listing is not in bytewise key order, so the sync "
                            + "cannot merge it; report this provider's listing order as a bug", provider: id)
                }
                last = key
            }
            guard page.nextCursor == nil || page.nextCursor != cursor else {
                throw CloudSyncError(
                    .provider, "listing returned the same cursor twice; it would never end", provider: id)
            }
            buffer = page.keys
            cursor = page.nextCursor
            finished = cursor == nil
        } catch {
            fail(error)
        }
    }

    /// Forgets a failed feed read, so the provider can be listed in full instead.
    func clearError() {
        error = nil
        finished = false
        spill = nil
        buffer = []
        index = 0
    }

    private func fail(_ error: CloudSyncError) {
        self.error = error
        finished = true
        buffer = []
        index = 0
        spill = nil
    }
}

/// A temporary on-disk table of keys, read back in bytewise order; the file goes when the last reference does.
final class KeySpill {
    private let database: SQLiteDatabase
    private let path: String

    init() throws(CloudSyncError) {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "cloudsync-keys-\(getpid())-\(UUID().uuidString).db"
            ).path
        do {
            database = try SQLiteDatabase(path: path, options: SQLiteDatabase.Options(writeAheadLog: false))
            try database.write { db in
                try db.executeScript("CREATE TABLE keys (key TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
            }
        } catch {
            throw CloudSyncError(.config, "cannot make a temporary table to sort a listing in \(path): \(error)")
        }
    }

    deinit {
        database.close()
        unlink(path)
        unlink(path + "-journal")
    }

    func add(_ keys: [String]) throws(CloudSyncError) {
        do {
            try database.write { db in
                try db.transaction {
                    let insert = try db.prepare("INSERT OR IGNORE INTO keys (key) VALUES (?)")
                    for key in keys {
                        try insert.bind(key).run()
                        insert.reset()
                    }
                }
            }
        } catch {
            throw CloudSyncError(.config, "the temporary table \(path) failed: \(error)")
        }
    }

    func keys(after key: String?, limit: Int) throws(CloudSyncError) -> [String] {
        do {
            return try database.read { db in
                try db.query("SELECT key FROM keys WHERE key > ? ORDER BY key LIMIT ?", [key ?? "", limit]) {
                    $0.string(0) ?? ""
                }
            }
        } catch {
            throw CloudSyncError(.config, "the temporary table \(path) failed: \(error)")
        }
    }
}

extension JobExecutor {
    /// Keys per page a sync reads, compares and writes; each page's snapshot rows commit together.
    static let syncPageSize = 1000
    /// Snapshot rows and deletions a sync collects before committing them (or after a second).
    static let syncCommitRows = 20_000
    /// The most keys a report lists of a sync's deletions or conflicts.
    static let syncListLimit = 100

    /// A sync job: merges every provider's sorted listing with the job's snapshot (read in key order from the state
    /// database), syncs page by page, and deletes what was deleted since the last run once it knows the count is
    /// within `maxDeletes`.
    ///
    /// With `incremental`, a provider whose change feed has a cursor from the job's last clean run contributes only
    /// the keys changed since (a provider without one is listed in full); when every listed provider does, the
    /// snapshot is not walked either: only the changed keys are compared, each with its snapshot row. The cursors
    /// taken before reading land with the run's end, and only after a run that left nothing behind (no failures,
    /// queued writes, held-back deletions or unlisted providers), so the next run sees again whatever was left.
    func sync(
        _ ids: [String], deletes: SyncDeletes, maxDeletes: DeleteLimit, incremental: Bool = false,
        into entry: inout RunReport.Job
    ) async throws(CloudSyncError) {
        let job = entry.name
        let state = stateDatabase
        let pageSize = Self.syncPageSize
        let firstRun = !((try state?.hasSynced(job)) ?? false)
        try state?.clearDeletions(of: job)
        var unlisted: [String: CloudSyncError] = [:]
        var sources: [OrderedKeys] = []
        let storedCursors = incremental && !firstRun ? (try state?.syncCursors(of: job) ?? [:]) : [:]
        var modes: [String: String] = [:]
        var fullBecause: [String: String] = [:]
        var newCursors: [String: String] = [:]
        for id in ids {
            // The probe runs under the store's deadline: a hung provider is left out, not waited on.
            guard let provider = providers[id] else { continue }
            guard provider.capabilities.canList else {
                unlisted[id] = CloudSyncError(.unsupported, "this provider cannot list its keys", provider: id)
                continue
            }
            let availability = try await store.availability(of: id)
            guard availability.isAvailable else {
                unlisted[id] = CloudSyncError(
                    .noProvider, "it was unavailable (\(availability)); its keys were neither read nor deleted",
                    provider: id)
                continue
            }
            let source = OrderedKeys(id: id)
            if incremental {
                if let stored = storedCursors[id] {
                    switch await source.spillChanges(from: store, since: stored, pageSize: pageSize) {
                    case .read(let cursor):
                        modes[id] = "incremental"
                        newCursors[id] = cursor
                        sources.append(source)
                        continue
                    case .expired(let reason):
                        fullBecause[id] = "its cursor was refused: \(reason)"
                    case .failed:
                        // A provider that is really down fails its listing next, and is left out then.
                        fullBecause[id] = "its change feed failed: \(source.error?.message ?? "")"
                        source.clearError()
                    }
                }
                // The feed's position before the listing: whatever changes from here on, the next run reads.
                let cursor: String?
                do throws(CloudSyncError) {
                    cursor = try await store.changeFeedCursor(of: id)
                } catch {
                    cursor = nil
                    fullBecause[id] = "its change feed failed: \(error.message)"
                }
                if let cursor { newCursors[id] = cursor }
                if fullBecause[id] == nil {
                    fullBecause[id] =
                        cursor == nil
                        ? "it offers no change feed"
                        : firstRun || storedCursors.isEmpty ? "no earlier clean run left a cursor" : "it had no cursor"
                }
                modes[id] = "full"
            }
            if !provider.capabilities.listsInKeyOrder {
                await source.spillListing(from: store, pageSize: pageSize)
                if let error = source.error {
                    unlisted[id] = error
                    continue
                }
            }
            sources.append(source)
        }
        // Every listed provider reads from its feed: the keys changed anywhere are all there is to compare.
        let changedOnly = incremental && !sources.isEmpty && sources.allSatisfy { modes[$0.id] == "incremental" }
        let snapshot = SnapshotRows(state: changedOnly ? nil : state, job: job, pageSize: pageSize)

        var counts: [String: Int] = [
            "keys": 0, "inSync": 0, "repaired": 0, "skipped": 0, "failed": 0, "queued": 0, "deleted": 0,
            "conflicts": 0, "heldBack": 0,
        ]
        var conflicts: [RunReport.Conflict] = []
        var deletionCount = 0
        var deletionKeys: [String] = []
        // maxDeletes counts against the keys the last sync left, as a full run's merge counts them.
        var snapshotKeys = changedOnly ? (try state?.snapshotCount(of: job) ?? 0) : 0
        var unknown = Set(unlisted.keys)  // provider ids, not store keys
        // Snapshot rows and deletions wait here for a few pages and commit together: each commit of the state
        // database costs fsyncs. The providers' writes always land before the rows that describe them.
        var pendingRows: [(key: String, fingerprint: SyncFingerprint?)] = []
        var pendingDeletions: [String] = []
        var lastCommit = ContinuousClock.now
        func commit() throws(CloudSyncError) {
            try state?.recordSyncProgress(of: job, snapshot: pendingRows, deletions: pendingDeletions)
            pendingRows.removeAll(keepingCapacity: true)
            pendingDeletions.removeAll(keepingCapacity: true)
            lastCommit = ContinuousClock.now
        }

        func process(_ batch: [SyncItem]) async throws(CloudSyncError) {
            var batch = batch
            if changedOnly, let state {
                let rows = try state.snapshotRows(of: job, keys: batch.map(\.key))
                var byKey: [StoreKey: SyncFingerprint] = [:]
                for row in rows { byKey[StoreKey(row.key)] = row.fingerprint }
                for index in batch.indices { batch[index].baseline = byKey[StoreKey(batch[index].key)] }
            }
            let result = try await store.maintenance.syncPage(batch, among: ids, unknown: unknown, deletes: deletes)
            counts["keys", default: 0] += result.keys
            counts["inSync", default: 0] += result.inSync
            counts["repaired", default: 0] += result.repaired
            counts["skipped", default: 0] += result.skipped
            counts["queued", default: 0] += result.queued
            counts["failed", default: 0] += result.failed.count
            counts["conflicts", default: 0] += result.conflicts.count
            counts["heldBack", default: 0] += result.heldBack.count
            record(result.failed, in: &entry)
            for conflict in result.conflicts where conflicts.count < Self.syncListLimit {
                conflicts.append(
                    RunReport.Conflict(
                        key: conflict.key, kind: conflict.kind.rawValue, editedOn: conflict.editedOn,
                        deletedOn: conflict.deletedOn))
            }
            pendingRows += result.snapshot
            pendingDeletions += result.deletions.map(\.key)
            deletionCount += result.deletions.count
            for item in result.deletions where deletionKeys.count < Self.syncListLimit { deletionKeys.append(item.key) }
            if pendingRows.count + pendingDeletions.count >= Self.syncCommitRows
                || ContinuousClock.now - lastCommit >= .seconds(1)
            {
                try commit()
            }
            progress(counts["keys"] ?? 0, nil)
        }

        var batch: [SyncItem] = []
        batch.reserveCapacity(pageSize)
        while true {
            if options.interrupt.isRaised { break }
            for source in sources where source.needsRefill {
                await source.refill(from: store, pageSize: pageSize)
                if let error = source.error, unlisted[source.id] == nil {
                    unlisted[source.id] = error
                    unknown.insert(source.id)
                }
            }
            if snapshot.needsRefill { try snapshot.refill() }
            var next = snapshot.head?.key
            for source in sources {
                guard let head = source.head else { continue }
                if let smallest = next, !StoreKey.bytesPrecede(head, smallest) { continue }
                next = head
            }
            guard let key = next else { break }
            var baseline: SyncFingerprint?
            if let row = snapshot.head, StoreKey.bytesEqual(row.key, key) {
                baseline = row.fingerprint
                snapshotKeys += 1
                snapshot.advance()
            }
            for source in sources where source.head.map({ StoreKey.bytesEqual($0, key) }) == true { source.advance() }
            batch.append(SyncItem(key: key, baseline: baseline))
            if batch.count == pageSize {
                try await process(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty, !options.interrupt.isRaised { try await process(batch) }
        try commit()

        entry.sync = RunReport.SyncDetails(
            firstRun: firstRun, deletes: deletes.rawValue, maxDeletes: maxDeletes.description,
            unlisted: unlisted.sorted { $0.key < $1.key }.map { id, error in
                RunReport.Failure(key: "", provider: id, code: error.code.rawValue, message: error.message)
            }, conflicts: conflicts, deletions: deletionKeys,
            deletionsOmitted: max(0, deletionCount - deletionKeys.count), modes: incremental ? modes : nil,
            fullBecause: incremental ? fullBecause : nil)
        if options.interrupt.isRaised {
            entry.status = .interrupted
            entry.counts = counts
            return
        }
        let allowed = maxDeletes.allowed(snapshotKeys: snapshotKeys)
        if deletionCount > allowed && !options.force {
            entry.counts = counts
            entry.status = .failed
            entry.error = RunReport.Failure(
                key: "", provider: nil, code: ErrorCode.tooManyDeletes.rawValue,
                message:
                    "this sync would delete \(deletionCount) of the \(snapshotKeys) keys the last sync left, more "
                    + "than maxDeletes (\(maxDeletes.description)) allows, so it deleted none; check the deletions "
                    + "listed in the report, then run again with --force to allow them once")
            return
        }
        if options.dryRun || state == nil {
            counts["deleted"] = deletionCount
        } else if let state {
            var after: String?
            while !options.interrupt.isRaised {
                let items = try state.deletions(of: job, after: after, limit: pageSize)
                guard let last = items.last else { break }
                after = last.key
                let result = try await store.maintenance.removeUnchanged(items, among: ids, unknown: unknown)
                counts["deleted", default: 0] += result.removed.count
                counts["heldBack", default: 0] += result.heldBack
                counts["queued", default: 0] += result.queued
                counts["failed", default: 0] += result.failed.count
                record(result.failed, in: &entry)
                try state.updateSnapshot(of: job, result.removed.map { ($0, nil) })
            }
            try state.clearDeletions(of: job)
        }
        entry.counts = counts
        if options.interrupt.isRaised {
            entry.status = .interrupted
            return
        }
        // Cursors advance only past a run that left nothing to look at again; otherwise the last clean run's stay.
        let clean =
            unlisted.isEmpty && counts["failed", default: 0] == 0 && counts["queued", default: 0] == 0
            && counts["heldBack", default: 0] == 0
        try state?.markSynced(
            job, at: iso8601(Int64(Date().timeIntervalSince1970 * 1000)),
            cursors: incremental && clean && !options.dryRun ? newCursors : nil)
    }
}

/// A sync job's snapshot rows in key order, a page at a time; none without a state database.
final class SnapshotRows {
    private let state: StateDatabase?
    private let job: String
    private let pageSize: Int
    private var buffer: [(key: String, fingerprint: SyncFingerprint)] = []
    private var index = 0
    private var finished: Bool

    init(state: StateDatabase?, job: String, pageSize: Int) {
        self.state = state
        self.job = job
        self.pageSize = pageSize
        finished = state == nil
    }

    var head: (key: String, fingerprint: SyncFingerprint)? { index < buffer.count ? buffer[index] : nil }
    var needsRefill: Bool { index >= buffer.count && !finished }
    func advance() { index += 1 }

    func refill() throws(CloudSyncError) {
        let after = buffer.last?.key
        buffer = try state?.snapshotRows(of: job, after: after, limit: pageSize) ?? []
        index = 0
        finished = buffer.count < pageSize
    }
}
