import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Finding keys' files: `files.list` pages and the name → file-id cache that saves lookups.
extension DriveProvider {
    // MARK: Lookups

    static let listFields = "nextPageToken,files(id,name,modifiedTime,md5Checksum,sha256Checksum)"

    /// `name = '…'` with Drive's escapes: `\` as `\\`, `'` as `\'`.
    static func nameQuery(_ key: String) -> String {
        let escaped = key.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
        return "name = '\(escaped)' and trashed = false"
    }

    struct Listed {
        var id: String
        var name: String
        var modified: String
        /// The content's `md5Checksum` (or `sha256Checksum` where Drive gives only that): a new one with every
        /// change of the bytes.
        var checksum: String?
    }

    /// One `files.list` page; nil when Drive rejected the page token.
    func listPage(query: String, pageToken: String?, pageSize: Int, orderBy: String?, fields: String)
        async throws(CloudSyncError) -> (files: [Listed], next: String?)?
    {
        var items = [
            ("spaces", "appDataFolder"), ("q", query), ("pageSize", String(pageSize)), ("fields", fields),
        ]
        if let orderBy { items.append(("orderBy", orderBy)) }
        if let pageToken { items.append(("pageToken", pageToken)) }
        let request = HTTPRequest(method: .get, url: url("/drive/v3/files", items))
        let response = try await send(request)
        if response.status == 400, pageToken != nil, DriveErrorBody(response.body).location == "pageToken" {
            return nil
        }
        guard response.isSuccess else { throw failure(response, request) }
        let object = try json(response, request)
        let files = (object["files"] as? [[String: Any]] ?? []).compactMap { file -> Listed? in
            guard let id = file["id"] as? String, let name = file["name"] as? String else { return nil }
            let checksum =
                (file["md5Checksum"] as? String).map { "md5:" + $0 }
                ?? (file["sha256Checksum"] as? String).map { "sha256:" + $0 }
            return Listed(
                id: id, name: name, modified: file["modifiedTime"] as? String ?? "", checksum: checksum)
        }
        let next = object["nextPageToken"] as? String
        return (files, next?.isEmpty == false ? next : nil)
    }

    /// Every file matching `query`, all pages; a rejected page token starts the listing again (twice at most).
    func listAll(query: String) async throws(CloudSyncError) -> [Listed] {
        var restarts = 0
        while true {
            var files: [Listed] = []
            var token: String?
            var rejected = false
            repeat {
                guard
                    let page = try await listPage(
                        query: query, pageToken: token, pageSize: Self.pageSize, orderBy: nil, fields: Self.listFields)
                else {
                    rejected = true
                    break
                }
                files += page.files
                token = page.next
            } while token != nil
            if !rejected { return files }
            restarts += 1
            guard restarts <= 2 else {
                throw CloudSyncError(
                    .provider, "Drive rejected the listing's page tokens three times in a row; try again later",
                    provider: id)
            }
            logger.log(.info, "Drive rejected a page token of \(id)'s listing; listing again from the start")
        }
    }

    /// Groups `files` by name: the newest `modifiedTime` is the key's file, the others duplicates.
    func entries(_ files: [Listed]) -> [StoreKey: Entry] {
        var byName: [StoreKey: [Listed]] = [:]
        for file in files { byName[StoreKey(file.name), default: []].append(file) }
        cache.withLock { cache in
            for file in files { cache.names[file.id] = file.name }
        }
        var entries: [StoreKey: Entry] = [:]
        for (name, group) in byName {
            let sorted = group.sorted { ($0.modified, $0.id) > ($1.modified, $1.id) }
            entries[name] = Entry(
                id: sorted[0].id, duplicates: sorted.dropFirst().map(\.id), version: sorted[0].checksum,
                modified: UTCTimestamp.milliseconds(sorted[0].modified[...]))
        }
        let surplus = entries.values.flatMap(\.duplicates)
        if !surplus.isEmpty {
            let fresh = cache.withLock { cache -> Int in
                let before = cache.duplicates.count
                cache.duplicates.formUnion(surplus)
                return cache.duplicates.count - before
            }
            if fresh > 0 {
                metrics.recordDuplicates(fresh)
                logger.log(
                    .warning,
                    "\(fresh) more files in \(id)'s app data folder share a key's name with a newer one; reads use "
                        + "the newest, writes and removes delete the others")
            }
        }
        return entries
    }

    /// The file (and duplicates) of each of `keys` that exists; cached ids first, then one listing or one search per
    /// key, whichever costs fewer requests.
    ///
    /// `forWriting`: a name missing from a full listing begun less than ``listingTrust`` ago is taken as absent
    /// without asking again, so the store's batches of new keys share one listing. Another device may create the
    /// name meanwhile, as it may between any lookup and the create that follows it; the write then makes a second
    /// file of that name, which reads settle (the newest wins) and the next write deletes. Reads and removes never
    /// take a name as absent on trust: a read would miss the other device's value, a remove would leave it.
    func resolve(_ keys: [String], forWriting: Bool = false) async throws(CloudSyncError) -> [StoreKey: Entry] {
        var found: [StoreKey: Entry] = [:]
        var missing: [String] = []
        var lastCount: Int?
        /// Splits `keys` into those the cache knows and those it does not; false when a write could trust the
        /// listing for the missing ones but its trust ran out.
        func split() -> Bool {
            let now = clock.nowMilliseconds()
            let (known, count, trusted, expired) = cache.withLock { cache in
                let fresh = cache.listedAtMs.map { now - $0 < Self.listingTrust.milliseconds } == true
                return (cache.entries, cache.lastListingCount, forWriting && fresh ? cache.doubtful : nil, !fresh)
            }
            lastCount = count
            (found, missing) = ([:], [])
            for name in keys.keySet() {
                if let entry = known[name] {
                    found[name] = entry
                } else if let doubtful = trusted, !doubtful.contains(name) {
                    continue
                } else {
                    missing.append(name.string)
                }
            }
            return !(forWriting && expired && !missing.isEmpty)
        }
        if !split(), await renewListing() { _ = split() }
        guard !missing.isEmpty else { return found }
        let listingPages = max(1, ((lastCount ?? 0) + Self.pageSize - 1) / Self.pageSize)
        if missing.count > 1, lastCount == nil || listingPages < missing.count {
            let listed = try await listFolder()
            for key in missing { found[StoreKey(key)] = listed[StoreKey(key)] }
            return found
        }
        let searched = try await forEach(missing) { key async -> Result<Entry?, CloudSyncError> in
            do throws(CloudSyncError) {
                return .success(try await self.search(key))
            } catch {
                return .failure(error)
            }
        }
        for (key, result) in zip(missing, searched) {
            if let entry = try result.get() { found[StoreKey(key)] = entry }
        }
        return found
    }

    /// Lists the whole app data folder and makes what it found the file id cache.
    ///
    /// A folder that last listed more than one page takes the change feed's position first, so that once the trust
    /// runs out ``renewListing()`` renews it from the feed. (A folder never listed before takes none: a folder of one
    /// page lists again as cheaply as the feed is read, and the request would be spent.) Whether the folder was large
    /// is kept in the provider's state, so a later process's first listing of it takes the position too.
    func listFolder() async throws(CloudSyncError) -> [StoreKey: Entry] {
        let started = clock.nowMilliseconds()
        let (changesBefore, lastCount) = cache.withLock { ($0.changes, $0.lastListingCount) }
        let rememberedLarge = (try? state.value(Self.largeFolderStateName)) == "true"
        let large = lastCount.map { $0 > Self.pageSize } ?? rememberedLarge
        // Failing to take it only means listing again later, as without it.
        let cursor = large ? try? await changes(since: nil).cursor : nil
        let files = try await listAll(query: "trashed = false")
        // Written only when it changes: most listings find the folder as large as the last one did. Failing to
        // keep it only costs a later process a listing.
        if (files.count > Self.pageSize) != rememberedLarge {
            try? state.set(files.count > Self.pageSize ? "true" : nil, for: Self.largeFolderStateName)
        }
        let listed = entries(files)
        cache.withLock { cache in
            cache.entries = listed
            cache.lastListingCount = files.count
            // A write, remove or lookup meanwhile (another store call) may be missing from the listing.
            if cache.changes == changesBefore {
                cache.listedAtMs = started
                cache.feedCursor = cursor
                cache.doubtful.removeAll()
            } else {
                cache.listedAtMs = nil
                cache.feedCursor = nil
            }
        }
        return listed
    }

    /// Renews a listing whose trust ran out from the change feed since its cursor; returns whether it is trusted
    /// again (false without a cursor, or when the feed could not be read: the caller lists instead).
    ///
    /// A file the feed reports that the cache does not hold under its name (another device created it, renamed it,
    /// or deleted the one the cache holds) makes that name doubtful, looked up before a write relies on it; a change
    /// to a file the cache already holds under its name, this provider's own writes included, changes nothing. The
    /// trust then counts from when the feed read began. Calls that need a renewal at once share one feed read.
    func renewListing() async -> Bool {
        let task = renewal.withLock { current -> Task<Bool, Never> in
            if let current { return current }
            let task = Task {
                let renewed = await self.readFeedIntoCache()
                self.renewal.withLock { $0 = nil }
                return renewed
            }
            current = task
            return task
        }
        return await task.value
    }

    private func readFeedIntoCache() async -> Bool {
        guard let cursor = cache.withLock({ $0.listedAtMs == nil ? nil : $0.feedCursor }) else { return false }
        let started = clock.nowMilliseconds()
        guard let feed = try? await readFeed(since: cursor) else { return false }
        return cache.withLock { cache in
            // A listing meanwhile replaced the cache (and its cursor, if it took one).
            guard cache.feedCursor == cursor, cache.listedAtMs != nil else { return false }
            for change in feed.changes {
                guard let name = change.name ?? cache.names[change.fileID] else { continue }
                let key = StoreKey(name)
                let entry = cache.entries[key]
                let held = entry?.id == change.fileID || entry?.duplicates.contains(change.fileID) == true
                // A file the cache holds, changed in place, leaves its name's entry as it is; so does the deletion of
                // a file the cache does not hold under that name.
                if held != change.removed { continue }
                cache.entries.removeValue(forKey: key)
                cache.doubtful.insert(key)
                cache.changes += 1
            }
            cache.feedCursor = feed.cursor
            cache.listedAtMs = started
            return true
        }
    }

    /// Looks `key` up by name (one request) and caches what it finds.
    func search(_ key: String) async throws(CloudSyncError) -> Entry? {
        let files = try await listAll(query: Self.nameQuery(key))
        // Drive may answer names it deems equal (other normalisations, other case); only the same bytes are the key.
        let entry = entries(files.filter { StoreKey.bytesEqual($0.name, key) })[StoreKey(key)]
        cache.withLock { cache in
            cache.entries[StoreKey(key)] = entry
            cache.doubtful.remove(StoreKey(key))
            cache.changes += 1
        }
        return entry
    }

    /// Drops `key`'s entry after this provider removed its file: it is known to be absent.
    func forget(_ key: String) {
        cache.withLock { cache in
            cache.entries.removeValue(forKey: StoreKey(key))
            cache.changes += 1
        }
    }

    /// Drops `key`'s entry because it may be stale: it is looked up again before anything relies on it.
    func doubt(_ key: String) {
        cache.withLock { cache in
            cache.entries.removeValue(forKey: StoreKey(key))
            cache.doubtful.insert(StoreKey(key))
            cache.changes += 1
        }
    }
}
