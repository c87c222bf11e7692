/// What `verify` found.
public struct VerifyResult: Sendable, Equatable {
    /// Keys read.
    public var checked = 0
    /// Keys whose value decodes.
    public var ok = 0
    /// Keys whose value does not, with why (never the value).
    public var failed: [KeyFailure] = []
    /// Bytes of stored values read, as stored (encoded).
    public var bytesRead = 0
}

/// The store's maintenance operations (migrate, reconcile, rekey, verify), beside its key-value API.
///
/// They are for operators and jobs rather than apps: each walks whole providers or key sets, names providers by
/// id (attached ones included) and reports what failed key by key. Keeping them off ``CloudStore`` keeps the
/// store's surface the key-value API of the reference design. They share the store's deadline, codecs, size caps,
/// key locks and outbox, so a migration obeys the same rules as a write.
public struct StoreMaintenance: Sendable {
    /// The store whose providers, options and locks the operations use.
    public let store: CloudStore

    /// Maintenance operations on `store`.
    public init(_ store: CloudStore) { self.store = store }

    /// Copies every key of provider `from` to provider `to`; the source is never modified.
    ///
    /// Values are decoded with the source's codec and encoded with the destination's, so a migration can also move
    /// values between codecs. Keys are listed first (for `onProgress`'s total), then copied in batches whole for both
    /// providers (``BatchSizing/commonPage(of:floor:)`` of their batch limits), so each costs its fewest requests.
    /// - Parameters:
    ///   - filter: only keys for which it returns true are copied.
    ///   - continueOnError: when false, the migration stops after the batch holding the first failing key, and
    ///     ``MigrationResult/completed`` is false. When true, the next batch is read and written while the one before
    ///     it finishes.
    ///   - overwrite: when false, keys the destination already holds are skipped rather than replaced.
    ///   - onProgress: called with (keys done, total) after each batch.
    ///   - shouldStop: asked before each batch; when it answers true the migration stops there, not completed.
    public func migrate(
        from source: String, to destination: String, filter: (@Sendable (String) -> Bool)? = nil,
        continueOnError: Bool = true, overwrite: Bool = true, onProgress: (@Sendable (Int, Int) -> Void)? = nil,
        shouldStop: (@Sendable () -> Bool)? = nil
    ) async throws(CloudSyncError) -> MigrationResult {
        let (from, to) = try migrationEnds(source, destination)
        var keys: [String] = []
        try await store.forEachPage(of: from) { page in keys += filter.map { page.filter($0) } ?? page }

        var result = MigrationResult(total: keys.count)
        let batchSize = BatchSizing.commonPage(of: [from.capabilities.batchLimit, to.capabilities.batchLimit])
        let finished = await copyOverlapped(
            keys.chunked(batchSize).map(Array.init), from: from, to: to, overwrite: overwrite ? .always : .ifMissing,
            landing: false, overlapping: continueOnError,
            shouldStop: shouldStop
        ) { outcome in
            result.copied += outcome.copied
            result.skipped += outcome.skipped
            result.failed += outcome.failed
            onProgress?(result.copied.count + result.skipped.count + result.failed.count, result.total)
            return continueOnError || outcome.failed.isEmpty
        }
        if !finished { result.completed = false }
        return result
    }

    /// ``migrate(from:to:filter:continueOnError:overwrite:onProgress:shouldStop:)`` page by page, holding one page of
    /// keys rather than the source's whole listing, and returning counts rather than keys.
    ///
    /// The progress total is the source's ``Provider/keyCount()`` when it can count cheaply and no filter is given,
    /// else nil. Each batch's failures go to `onFailures` as they happen, and the keys the destination now holds
    /// with the source's value (copied, or unchanged under ``Overwrite/ifDifferent``) to `onLanded`, batch by batch,
    /// once the destination acknowledged them.
    ///
    /// With `range`, only the keys in it are copied (one shard of a job split between runners): a source that lists
    /// in key order is listed from the range's start (where its cursor is a key) and no further than its end;
    /// another is listed whole and filtered. With `reshape`, keys take the destination names its rename gives and
    /// values pass through its ``ValueReshaping`` (a value it leaves out counts as skipped); the keys the callbacks
    /// hear are the source's. `onBatch` hears each batch's counts and last key once the batch is
    /// accounted, in listing order, and answers whether to go on (a runner that lost its lease stops).
    public func migrateByPage(
        from source: String, to destination: String, filter: (@Sendable (String) -> Bool)? = nil,
        continueOnError: Bool = true, overwrite: Overwrite = .always, reshape: MigrationReshape = .none,
        range: KeyRange = .all,
        onProgress: (@Sendable (Int, Int?) -> Void)? = nil, onFailures: ([KeyFailure]) -> Void = { _ in },
        onLanded: (([LandedCopy]) async -> Void)? = nil,
        onBatch: ((_ counts: MigrationCounts, _ lastKey: String) async -> Bool)? = nil,
        shouldStop: (@Sendable () -> Bool)? = nil
    ) async throws(CloudSyncError) -> MigrationCounts {
        let (from, to) = try migrationEnds(source, destination)
        guard from.capabilities.canList else {
            throw CloudSyncError(.unsupported, "this provider cannot list its keys", provider: source)
        }
        let total =
            filter == nil && range == .all
            ? try? await store.dispatcher(for: from).call { try await $0.keyCount() } : nil
        var counts = MigrationCounts()
        let ordered = from.capabilities.listsInKeyOrder
        // Batches whole for both providers (the dispatcher splits each into the source's reads and the
        // destination's writes), and a listing page's remainder waits for the next page, so the copy costs each
        // provider the fewest requests it allows whatever the listing's page size.
        let batchSize = BatchSizing.commonPage(of: [from.capabilities.batchLimit, to.capabilities.batchLimit])
        var pending: [String] = []
        var cursor = range.firstCursor(listing: from.capabilities)
        listing: repeat {
            let after = cursor
            let page = try await store.dispatcher(for: from).call {
                try await $0.listKeys(after: after, limit: CloudStore.listingPageSize)
            }
            try page.requireProgress(after: after, provider: source)
            let (listed, pastEnd) = range.keys(of: page.keys, ordered: ordered)
            cursor = pastEnd ? nil : page.nextCursor
            pending += filter.map { listed.filter($0) } ?? listed
            let ready = cursor == nil ? pending.count : pending.count / batchSize * batchSize
            guard ready > 0 else { continue listing }
            let keys = Array(pending[..<ready])
            defer { pending.removeFirst(ready) }
            let chunks = keys.chunked(batchSize).map(Array.init)
            var accounted = 0
            let finished = await copyOverlapped(
                chunks, from: from, to: to, overwrite: overwrite,
                landing: onLanded != nil, reshape: reshape, overlapping: continueOnError, shouldStop: shouldStop
            ) { outcome in
                counts.add(outcome.counts)
                onFailures(outcome.failed)
                if let onLanded { await onLanded(outcome.landed) }
                onProgress?(counts.copied + counts.skipped + counts.unchanged + counts.failed, total ?? nil)
                // Batches are accounted in the order they were cut, so this one is `chunks[accounted]`.
                let batch = chunks[accounted]
                accounted += 1
                if let onBatch, let last = batch.last, await !onBatch(outcome.counts, last) { return false }
                return continueOnError || outcome.failed.isEmpty
            }
            if !finished {
                counts.completed = false
                break listing
            }
        } while cursor != nil
        return counts
    }

    /// Copies `chunks` in order, with `overlapping` two under way at once: the next batch is read and written while
    /// the one before it finishes (a provider's durable write waits on the disk or the network, and the next batch's
    /// work fills that wait).
    ///
    /// `account` sees each batch's outcome in order and answers whether to go on; `shouldStop` is asked before each
    /// batch starts. After a stop or a `false`, no batch starts, though one already under way finishes and is
    /// accounted. Returns whether every chunk was copied. With `landing`, each outcome names the digest of every
    /// landed key's source value (``CopiedBatch/landed``).
    private func copyOverlapped(
        _ chunks: [[String]], from: any Provider, to: any Provider, overwrite: Overwrite, landing: Bool,
        reshape: MigrationReshape = .none, overlapping: Bool,
        shouldStop: (@Sendable () -> Bool)?,
        account: (CopiedBatch) async -> Bool
    ) async -> Bool {
        var underWay: Task<CopiedBatch, Never>?
        var goingOn = true
        var stopped = false
        for chunk in chunks {
            if shouldStop?() == true {
                stopped = true
                break
            }
            let started = Task {
                await copyBatch(
                    chunk, from: from, to: to, overwrite: overwrite, landing: landing, reshape: reshape)
            }
            if !overlapping {
                guard await account(await started.value) else {
                    goingOn = false
                    break
                }
                continue
            }
            if let previous = underWay, await !account(await previous.value) {
                goingOn = false
                underWay = started
                break
            }
            underWay = started
        }
        if let last = underWay, await !account(await last.value) { goingOn = false }
        return goingOn && !stopped
    }

    /// What one batch of a migration did, key by key.
    struct CopiedBatch: Sendable {
        var copied: [String] = []
        var skipped: [String] = []
        /// Keys the destination already held with the source's value (``Overwrite/ifDifferent``).
        var unchanged: [String] = []
        var failed: [KeyFailure] = []
        /// With `landing`: the digest of each copied or unchanged key's value as the source stored it.
        var sourceDigests: [StoreKey: String] = [:]

        /// How many keys it copied, skipped, found unchanged and failed.
        var counts: MigrationCounts {
            var counts = MigrationCounts()
            counts.copied = copied.count
            counts.skipped = skipped.count
            counts.unchanged = unchanged.count
            counts.failed = failed.count
            return counts
        }

        /// The keys the destination now holds with the source's value, each with its source digest.
        var landed: [LandedCopy] {
            (copied + unchanged).compactMap { key in
                sourceDigests[StoreKey(key)].map { LandedCopy(key: key, sourceDigest: $0) }
            }
        }
    }

    /// Copies one batch: reads, decodes, reshapes, re-encodes and writes it.
    ///
    /// Unless `overwrite` is `always`, what `to` holds under the names `reshape` gives is read too. Keys in the outcome are the
    /// source's; failures sorted by key.
    private func copyBatch(
        _ batch: [String], from: any Provider, to: any Provider, overwrite: Overwrite, landing: Bool,
        reshape: MigrationReshape
    ) async -> CopiedBatch {
        var outcome = CopiedBatch()
        var copies: [KeyValue] = []
        // The source key of each destination name, when they differ (by bytes: two spellings are two keys).
        var sources: [StoreKey: String] = [:]
        do throws(CloudSyncError) {
            var named: [(key: String, target: String)] = []
            for key in batch {
                switch reshape.target(of: key) {
                case .success(let target):
                    named.append((key, target))
                    if StoreKey(target) != StoreKey(key) { sources[StoreKey(target)] = key }
                case .failure(let error): outcome.failed.append(KeyFailure(key: key, error: error))
                }
            }
            let (held, unreadable) =
                overwrite == .always
                ? ([:], [:]) : try await destinationCopies(of: named.map(\.target), on: to, overwrite: overwrite)
            let read = try await readForCopy(
                named, from: from, to: to, held: held, unreadable: unreadable, overwrite: overwrite, landing: landing,
                into: &outcome)
            let values = await reshape.reshaped(read.map { ($0.key, $0.value) })
            for (item, value) in zip(read, values) {
                do throws(CloudSyncError) {
                    guard let value = try value.get() else {
                        outcome.skipped.append(item.key)
                        outcome.sourceDigests[StoreKey(item.key)] = nil
                        continue
                    }
                    if let current = held[StoreKey(item.target)], !overwrite.writes(value, over: current) {
                        outcome.unchanged.append(item.key)
                        continue
                    }
                    copies.append(
                        KeyValue(item.target, try store.encodedValue(value, key: item.target, for: to).fitting()))
                } catch {
                    outcome.failed.append(KeyFailure(key: item.key, error: error.attributed(key: item.key)))
                }
            }
        } catch {
            outcome.failed = batch.map { KeyFailure(key: $0, error: error.concerning(key: $0)) }
            outcome.skipped = []
            outcome.unchanged = []
            outcome.sourceDigests = [:]
            copies = []
        }
        let (written, failed) = await store.writeBatch(copies, to: to)
        outcome.copied = written.map { sources[StoreKey($0)] ?? $0 }
        let failedWrites = failed.map { KeyFailure(key: sources[StoreKey($0.key)] ?? $0.key, error: $0.error) }
        outcome.failed = (outcome.failed + failedWrites).sorted { StoreKey.bytesPrecede($0.key, $1.key) }
        return outcome
    }

    /// Reads `named` from `from` and decodes each value.
    ///
    /// Returns the keys to copy, each with its destination name and plaintext. Keys skipped (absent at the source, or held at the destination under ``Overwrite/ifMissing``) and
    /// failed (unreadable there or here, undecodable, a name the destination's key rules refuse) go to `outcome`.
    private func readForCopy(
        _ named: [(key: String, target: String)], from: any Provider, to: any Provider, held: [StoreKey: String],
        unreadable: [StoreKey: CloudSyncError], overwrite: Overwrite, landing: Bool, into outcome: inout CopiedBatch
    ) async throws(CloudSyncError) -> [(key: String, target: String, value: String)] {
        var targets: [StoreKey: String] = [:]
        for item in named where StoreKey(item.target) != StoreKey(item.key) {
            targets[StoreKey(item.key)] = item.target
        }
        var read: [(key: String, target: String, value: String)] = []
        // The destination's key rules hold for copies as for any write: a name it refuses fails, by key.
        let rules = store.keyRules(of: [to])
        try await store.dispatcher(for: from).get(named.map(\.key)) { keys, answer throws(CloudSyncError) in
            for (key, result) in zip(keys, try answer.get()) {
                let target = targets[StoreKey(key)] ?? key
                if overwrite == .ifMissing, held[StoreKey(target)] != nil {
                    outcome.skipped.append(key)
                    continue
                }
                if let error = unreadable[StoreKey(target)] {
                    outcome.failed.append(KeyFailure(key: key, error: error))
                    continue
                }
                do throws(CloudSyncError) {
                    // Absent is "holding nothing"; an empty value is a value, copied like any other.
                    guard let stored = try result.get() else {
                        outcome.skipped.append(key)
                        continue
                    }
                    try store.validate(target, rules: rules)
                    let decoded = try store.decode(stored, key: key, from: from)
                    if landing { outcome.sourceDigests[StoreKey(key)] = SyncFingerprint.digest(of: stored) }
                    read.append((key, target, decoded))
                } catch {
                    outcome.failed.append(KeyFailure(key: key, error: error))
                }
            }
        }
        return read
    }

    /// What `to` holds of `batch`, which decides a copy unless it overwrites always: each held key's value (as stored
    /// for ``Overwrite/ifMissing``, which skips a key held; decoded for ``Overwrite/ifDifferent``, which leaves one
    /// held with the same plaintext unchanged), and the error of each key it could not read, which fails since whether
    /// (and what) it holds is unknown and copying could replace it.
    private func destinationCopies(
        of batch: [String], on to: any Provider, overwrite: Overwrite
    ) async throws(CloudSyncError) -> (held: [StoreKey: String], unreadable: [StoreKey: CloudSyncError]) {
        var held: [StoreKey: String] = [:]
        var unreadable: [StoreKey: CloudSyncError] = [:]
        try await store.dispatcher(for: to).get(batch) { keys, answer throws(CloudSyncError) in
            for (key, value) in zip(keys, try answer.get()) {
                switch value {
                case .success(let stored?):
                    if overwrite == .ifMissing {
                        held[StoreKey(key)] = stored
                        continue
                    }
                    do throws(CloudSyncError) {
                        held[StoreKey(key)] = try store.decode(stored, key: key, from: to)
                    } catch {
                        // An undecodable copy differs from any value: it is replaced.
                    }
                case .success(.none): break
                case .failure(let error): unreadable[StoreKey(key)] = error.attributed(key: key)
                }
            }
        }
        return (held, unreadable)
    }

    /// The source and destination providers of a migration, which must be two unless it rewrites keys `inPlace`.
    func migrationEnds(_ source: String, _ destination: String, inPlace: Bool = false) throws(CloudSyncError)
        -> (from: any Provider, to: any Provider)
    {
        let from = try store.provider(withID: source)
        let to = try store.provider(withID: destination)
        guard source != destination || inPlace else {
            throw CloudSyncError(.config, "cannot migrate provider \(source) onto itself", provider: source)
        }
        return (from, to)
    }

    /// Reads every value of one provider and checks that its codec decodes it; values are never returned or printed.
    ///
    /// Works page by page and batch by batch, so a large provider is never held in memory.
    public func verify(provider id: String) async throws(CloudSyncError) -> VerifyResult {
        let provider = try store.provider(withID: id)
        var result = VerifyResult()
        try await store.forEachStoredBatch(of: provider) { batch throws(CloudSyncError) in
            for (key, read) in batch {
                result.checked += 1
                do throws(CloudSyncError) {
                    guard let stored = try read.get() else { continue }
                    result.bytesRead += stored.utf8.count
                    _ = try store.decode(stored, key: key, from: provider)
                    result.ok += 1
                } catch {
                    result.failed.append(KeyFailure(key: key, error: error))
                }
            }
        }
        return result
    }

    /// Re-encodes every value of one provider with its codec's current key, reported like a migration: `copied` are
    /// the values re-encoded, `skipped` those already current, `failed` those that could not be decoded or written
    /// (an empty stored value is a value: plaintext the codec re-encodes when it allows plaintext, else undecodable).
    ///
    /// With a codec that allows plaintext, this is also how an existing plaintext store becomes encrypted.
    public func rekey(provider id: String) async throws(CloudSyncError) -> MigrationResult {
        let provider = try store.provider(withID: id)
        guard let codec = store.codec(for: provider) else {
            throw CloudSyncError(
                .config, "provider \(id) has no codec, so there is nothing to re-key with", provider: id)
        }
        var result = MigrationResult()
        try await store.forEachStoredBatch(of: provider) { batch throws(CloudSyncError) in
            var rewrites: [KeyValue] = []
            for (key, read) in batch {
                result.total += 1
                do throws(CloudSyncError) {
                    guard let stored = try read.get(), !codec.isCurrent(stored) else {
                        result.skipped.append(key)
                        continue
                    }
                    let decoded = try store.decode(stored, key: key, from: provider)
                    rewrites.append(KeyValue(key, try store.encodedValue(decoded, key: key, for: provider).fitting()))
                } catch {
                    result.failed.append(KeyFailure(key: key, error: error))
                }
            }
            let (written, failed) = await store.writeBatch(rewrites, to: provider)
            result.copied += written
            result.failed += failed
        }
        return result
    }

    /// One key's delivery outcomes, each beside whether its failure now waits in the outbox, tallied: whether any
    /// delivery landed and whether every one did, the failures that wait in the outbox, whether a conditional one
    /// found the key changed by another writer (`ERR_CHANGED_SINCE_READ`, not a failure), and the others (the key's).
    static func tally(
        _ outcomes: [(provider: String, result: CloudStore.Delivered)], queued flags: [Bool], key: String
    ) -> (landed: Bool, complete: Bool, queued: Int, changedSinceRead: Bool, failed: [KeyFailure]) {
        var tally = (landed: false, complete: true, queued: 0, changedSinceRead: false, failed: [KeyFailure]())
        for (outcome, isQueued) in zip(outcomes, flags) {
            switch outcome.result {
            case .success:
                tally.landed = true
            case .failure(let error) where error.code == .changedSinceRead:
                tally.complete = false
                tally.changedSinceRead = true
            case .failure(let error):
                tally.complete = false
                if isQueued { tally.queued += 1 } else { tally.failed.append(KeyFailure(key: key, error: error)) }
            }
        }
        return tally
    }
}

extension CloudStore {
    /// Migrate, reconcile, rekey and verify on this store.
    public var maintenance: StoreMaintenance { StoreMaintenance(self) }

    /// Lists one provider page by page and reads each page in batches of its limit, handing each batch's raw
    /// results to `body`.
    func forEachStoredBatch(
        of provider: any Provider,
        _ body: ([(String, Result<String?, CloudSyncError>)]) async throws(CloudSyncError) -> Void
    ) async throws(CloudSyncError) {
        try await forEachPage(of: provider) { page throws(CloudSyncError) in
            try await dispatcher(for: provider).get(page) { keys, answer throws(CloudSyncError) in
                try await body(Array(zip(keys, try answer.get())))
            }
        }
    }
}
