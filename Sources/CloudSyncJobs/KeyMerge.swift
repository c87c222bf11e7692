import CloudSync
import CloudSyncPipeline
import CloudSyncSQLite
import Foundation

/// One provider's keys in bytewise order, a page at a time: straight from its listing when it lists in key order,
/// else from a temporary table its whole listing was sorted into first; each with the version tag its listing gave
/// (``KeyPage/versions``), where it gave one.
///
/// Only keys in ``range`` come back: every key, unless a sharded job's runner set one with ``begin(in:listing:)``.
final class OrderedKeys {
    let id: String
    private(set) var range: KeyRange = .all
    private var buffer: [String] = []
    private var versions: [String?] = []
    private var index = 0
    private var cursor: String?
    private var finished = false
    private var last: String?
    private var spill: KeySpill?
    /// The next listing page, being read while the sync works on this one.
    private var ahead: Task<Result<KeyPage, CloudSyncError>, Never>?
    /// Why its listing stopped short; its keys are unknown from there on.
    private(set) var error: CloudSyncError?

    /// Whether each listing page is read while the caller works on the one before (it then calls ``settle()`` when
    /// its walk ends).
    let readsAhead: Bool

    init(id: String, readsAhead: Bool = false) {
        self.id = id
        self.readsAhead = readsAhead
    }

    /// Walks only the keys in `range`: the listing starts at the range's start where the provider takes a key as its
    /// cursor (a sorted spill always does), and ends at the first key past its end.
    func begin(in range: KeyRange, listing capabilities: ProviderCapabilities) {
        self.range = range
        cursor = capabilities.listsInKeyOrder ? range.firstCursor(listing: capabilities) : range.after
    }

    /// Keeps the keys of a page in bytewise order (and their versions) that fall in ``range``; true when the page went
    /// past its end, so the listing is done.
    private func keepInRange(_ keys: inout [String], _ tags: inout [String?]) -> Bool {
        guard range != .all else { return false }
        let (positions, pastEnd) = range.positions(in: keys, ordered: true)
        let listed = tags
        tags = positions.map { $0 < listed.count ? listed[$0] : nil }
        keys = positions.map { keys[$0] }
        return pastEnd
    }

    /// The next key, or nil when the listing is used up (or failed); call ``refill(from:pageSize:)`` first when
    /// ``needsRefill`` says so.
    var head: String? { index < buffer.count ? buffer[index] : nil }
    /// The version tag of ``head``; nil when the listing gave none.
    var headVersion: String? { index < versions.count ? versions[index] : nil }
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
                try spill.add(page.keys, versions: page.versions)
                try page.requireProgress(after: cursor, provider: id)
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
        versions = []
        index = 0
        do throws(CloudSyncError) {
            if let spill {
                let entries = try spill.entries(after: cursor, limit: pageSize)
                buffer = entries.map(\.key)
                versions = entries.map(\.version)
                cursor = buffer.last
                finished = buffer.count < pageSize
                if keepInRange(&buffer, &versions) { finished = true }
                return
            }
            let page = try await nextPage(from: store, pageSize: pageSize).get()
            for key in page.keys {
                if let last, !StoreKey.bytesPrecede(last, key) {
                    throw CloudSyncError(
                        .provider,
                        "listed \"\(key)\" after \"\(last)\": its listing is not in bytewise key order, so the sync "
                            + "cannot merge it; report this provider's listing order as a bug", provider: id)
                }
                last = key
            }
            try page.requireProgress(after: cursor, provider: id)
            buffer = page.keys
            versions = page.versions ?? []
            cursor = page.nextCursor
            finished = cursor == nil
            if keepInRange(&buffer, &versions) { finished = true }
            if readsAhead, !finished { ahead = readPage(from: store, after: cursor, limit: pageSize) }
        } catch {
            fail(error)
        }
    }

    /// The listing page after ``cursor``: the one read ahead when there is one (it always starts there), else a new
    /// read.
    private func nextPage(from store: CloudStore, pageSize: Int) async -> Result<KeyPage, CloudSyncError> {
        let page = ahead ?? readPage(from: store, after: cursor, limit: pageSize)
        ahead = nil
        return await page.value
    }

    /// Starts reading the page after `cursor`.
    ///
    /// Reading a page ahead never lists a key a sync is writing: the page starts after every key this listing has
    /// given, and a sync only writes keys up to the one it has taken.
    private func readPage(from store: CloudStore, after cursor: String?, limit: Int)
        -> Task<Result<KeyPage, CloudSyncError>, Never>
    {
        Task { [id] in
            do throws(CloudSyncError) {
                return .success(try await store.keyPage(of: id, after: cursor, limit: limit))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Waits for a page still being read ahead, so nothing lists the provider once the walk is over.
    func settle() async {
        _ = await ahead?.value
        ahead = nil
    }

    /// Forgets a failed feed read, so the provider can be listed in full instead.
    func clearError() {
        error = nil
        finished = false
        spill = nil
        buffer = []
        versions = []
        index = 0
    }

    private func fail(_ error: CloudSyncError) {
        self.error = error
        ahead = nil
        finished = true
        buffer = []
        versions = []
        index = 0
        spill = nil
    }
}

/// A temporary on-disk table of keys (each with a version tag, where one is known), read back in bytewise order; the
/// file goes when the last reference does.
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
                try db.executeScript("CREATE TABLE keys (key TEXT PRIMARY KEY NOT NULL, version TEXT) WITHOUT ROWID")
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

    /// Adds `keys`, each once; a key added again keeps the version tag it came with last (a listing that yields a
    /// key rewritten meanwhile a second time yields its newer tag second).
    func add(_ keys: [String], versions: [String?]? = nil) throws(CloudSyncError) {
        do {
            try database.write { db in
                try db.transaction {
                    let insert = try db.prepare(
                        "INSERT INTO keys (key, version) VALUES (?, ?) "
                            + "ON CONFLICT (key) DO UPDATE SET version = excluded.version")
                    for (index, key) in keys.enumerated() {
                        let version = versions.flatMap { index < $0.count ? $0[index] : nil }
                        try insert.bind(key, version.map(SQLiteValue.text) ?? .null).run()
                        insert.reset()
                    }
                }
            }
        } catch {
            throw CloudSyncError(.config, "the temporary table \(path) failed: \(error)")
        }
    }

    func keys(after key: String?, limit: Int) throws(CloudSyncError) -> [String] {
        try entries(after: key, limit: limit).map(\.key)
    }

    /// The next `limit` keys after `key` in bytewise order, with their version tags.
    func entries(after key: String?, limit: Int) throws(CloudSyncError) -> [(key: String, version: String?)] {
        do {
            return try database.read { db in
                try db.query(
                    "SELECT key, version FROM keys WHERE key > ? ORDER BY key LIMIT ?", [key ?? "", limit]
                ) { ($0.string(0) ?? "", $0.string(1)) }
            }
        } catch {
            throw CloudSyncError(.config, "the temporary table \(path) failed: \(error)")
        }
    }
}

/// A sync job's snapshot rows in key order, a page at a time, only those in `range`; none without a state database.
///
/// The page after the one being walked is read ahead on a thread of its own while the sync decides and writes, so a
/// state kept in PostgreSQL costs the sync its server's work, not also a round trip per page it waits on. The rows
/// read ahead are always past every key the sync has written a row for: a sync only takes a key once the snapshot
/// rows before it are all in hand.
final class SnapshotRows {
    typealias Page = [(key: String, fingerprint: SyncFingerprint)]

    private let state: (any PipelineState)?
    private let job: String
    private let pageSize: Int
    private let range: KeyRange
    private var buffer: Page = []
    private var index = 0
    private var finished: Bool
    private var cursor: String?
    /// The next page, being read.
    private var ahead: Task<Result<Page, CloudSyncError>, Never>?

    init(state: (any PipelineState)?, job: String, pageSize: Int, range: KeyRange = .all) {
        self.state = state
        self.job = job
        self.pageSize = pageSize
        self.range = range
        cursor = range.after
        finished = state == nil
    }

    var head: (key: String, fingerprint: SyncFingerprint)? { index < buffer.count ? buffer[index] : nil }
    var needsRefill: Bool { index >= buffer.count && !finished }
    func advance() { index += 1 }

    func refill() async throws(CloudSyncError) {
        let page = readPage(after: cursor)
        ahead = nil
        buffer = try await page.value.get()
        index = 0
        finished = buffer.count < pageSize
        cursor = buffer.last?.key ?? cursor
        if let end = buffer.firstIndex(where: { range.endsBefore($0.key) }) {
            buffer.removeSubrange(end...)
            finished = true
        }
        if !finished { ahead = readPage(after: cursor) }
    }

    /// Waits for a page still being read ahead, so nothing uses the state database once the walk is over.
    func settle() async { _ = await ahead?.value }

    /// The page after `key`: the one read ahead when there is one (it always starts there), else a new read.
    ///
    /// The state's calls block their thread (on a lock, or on the server's answer), so they run on a dispatch
    /// queue, not on a thread of the concurrency pool.
    private func readPage(after key: String?) -> Task<Result<Page, CloudSyncError>, Never> {
        if let ahead { return ahead }
        guard let state else { return Task { .success([]) } }
        let (job, limit) = (job, pageSize)
        return Task {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(
                        returning: Result { () throws(CloudSyncError) in
                            try state.snapshotRows(of: job, after: key, limit: limit)
                        })
                }
            }
        }
    }
}

/// Two providers' keys walked together in bytewise order, a page at a time.
///
/// Each selected key comes once, with the sides that list it. A listing that fails throws, so no caller acts on a side it could not see in full.
final class TwoSidedListing {
    /// One key and the sides that list it.
    struct Entry {
        let key: String
        let onSource: Bool
        let onDestination: Bool
        /// The version tags the two listings gave, where they gave one.
        var sourceVersion: String? = nil
        var destinationVersion: String? = nil
    }

    private let store: CloudStore
    private let source: OrderedKeys
    private let destination: OrderedKeys
    private let pageSize: Int
    private let filter: (@Sendable (String) -> Bool)?

    private let range: KeyRange

    /// Both listings, only the keys `keys` selects (globs; every key for nil) in `range` (a sharded job's leased
    /// range; every key by default).
    ///
    /// Both listings start and stop at the patterns' common literal prefix (``keyRange(of:)``), so a few keys of a
    /// large provider cost a listing of their stretch, not of the whole provider.
    init(from: String, to: String, store: CloudStore, pageSize: Int, keys: [String]?, range: KeyRange = .all) {
        self.store = store
        source = OrderedKeys(id: from)
        destination = OrderedKeys(id: to)
        self.pageSize = pageSize
        self.filter = keyFilter(keys)
        self.range = range.intersection(keyRange(of: keys))
    }

    /// Sorts the listing of a side that does not list in key order into a temporary table first.
    func prepare(providers: [String: any Provider]) async throws(CloudSyncError) {
        for side in [source, destination] {
            guard let provider = providers[side.id] else {
                throw CloudSyncError(.config, "no provider `\(side.id)` is open", provider: side.id)
            }
            guard provider.capabilities.canList else {
                throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: side.id)
            }
            side.begin(in: range, listing: provider.capabilities)
            if !provider.capabilities.listsInKeyOrder {
                await side.spillListing(from: store, pageSize: pageSize)
                if let error = side.error { throw error }
            }
        }
    }

    /// The next page of selected keys; empty when both listings are used up.
    func nextPage() async throws(CloudSyncError) -> [Entry] {
        var page: [Entry] = []
        while page.count < pageSize {
            for side in [source, destination] where side.needsRefill {
                await side.refill(from: store, pageSize: pageSize)
                if let error = side.error { throw error }
            }
            let key: String
            switch (source.head, destination.head) {
            case (nil, nil): return page
            case (let a?, nil): key = a
            case (nil, let b?): key = b
            case (let a?, let b?): key = StoreKey.bytesPrecede(b, a) ? b : a
            }
            let onSource = source.head.map { StoreKey.bytesEqual($0, key) } ?? false
            let onDestination = destination.head.map { StoreKey.bytesEqual($0, key) } ?? false
            let entry = Entry(
                key: key, onSource: onSource, onDestination: onDestination,
                sourceVersion: onSource ? source.headVersion : nil,
                destinationVersion: onDestination ? destination.headVersion : nil)
            if onSource { source.advance() }
            if onDestination { destination.advance() }
            if filter?(key) ?? true { page.append(entry) }
        }
        return page
    }
}
