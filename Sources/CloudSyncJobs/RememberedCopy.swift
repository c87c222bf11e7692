import CloudSync
import CloudSyncPipeline

/// Makes `to` hold `from`'s value for pages of keys, remembering in a ``MirrorSnapshot`` what it saw, so that a key
/// nobody wrote on either side since costs no read and no write: what `mirror` and `migrate` copy with.
///
/// A key whose listed tags on both sides are the snapshot's is unchanged without a read. Otherwise it is read at
/// `from`; when its value has the snapshot's digest and `to`'s tag is the snapshot's, `to` still holds it. What is
/// left is read at `to` and compared before it is written (``comparesBeforeWriting``), or written at once. A value
/// written has its tag recorded where the write answers one (or where the tag is the value's digest); elsewhere the
/// next run reads it once at `to` and records the tag it lists.
struct RememberedCopy {
    /// What one page came to, key by key.
    struct Tally {
        /// Keys `to` lacked, written.
        var copied = 0
        /// Keys `to` held with another value (or one not compared), rewritten.
        var updated = 0
        /// Keys `to` already held with `from`'s value: no write.
        var unchanged = 0
        /// Keys that could not be read, decoded or written (each recorded in the report).
        var failed = 0
        /// Keys gone from `from` between its listing and its read.
        var gone = 0
    }

    let from: String
    let to: String
    let snapshot: MirrorSnapshot
    /// Whether a key whose source value the snapshot cannot vouch for is read at `to` and compared before it is
    /// written (`mirror`, `migrate`'s `overwrite: ifDifferent`), or written without that read (`overwrite: always`).
    let comparesBeforeWriting: Bool

    /// What one page found and did, for the snapshot: each key's new row, or nil to forget it.
    private typealias RowChanges = [(key: String, row: MirrorRow?)]

    /// A key read at the source that may have to be written: its listing entry, the value, its digest, and whether
    /// the snapshot says `to` held this very value when the job last saw it (its tag there unknown or moved since).
    private typealias Candidate = (entry: TwoSidedListing.Entry, value: String, digest: String, asRecorded: Bool)

    /// Makes `to` hold `from`'s value for `entries` (keys `from` listed), recording failures in `report`.
    func copy(_ entries: [TwoSidedListing.Entry], in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError) -> Tally
    {
        var tally = Tally()
        guard !entries.isEmpty else { return tally }
        // Told to read every copy (`--read-unchanged`, after a codec's key was replaced), it trusts no row, and
        // records what it finds.
        let rows = context.readsUnchanged ? [:] : try snapshot.rows(entries.map(\.key))
        var changes: RowChanges = []
        var toRead: [TwoSidedListing.Entry] = []
        for entry in entries {
            // Both tags as the snapshot saw them: nobody wrote either side since the job made them agree.
            if entry.onDestination, let row = rows[StoreKey(entry.key)], let source = entry.sourceVersion,
                let destination = entry.destinationVersion, row.sourceVersion == source,
                row.destinationVersion == destination
            {
                tally.unchanged += 1
            } else {
                toRead.append(entry)
            }
        }
        let candidates = try await readSource(
            toRead, rows: rows, in: context, changes: &changes, tally: &tally, report: &report)
        // Without comparing, a value the snapshot says `to` held is still read there first (in one batch): that
        // read spares a write when `to`'s tag only moved for another reason, or was never recorded.
        let compared = comparesBeforeWriting ? candidates : candidates.filter(\.asRecorded)
        var writes = try await differing(compared, in: context, changes: &changes, tally: &tally, report: &report)
        if !comparesBeforeWriting {
            writes += candidates.filter { !$0.asRecorded }.map { ($0, $0.entry.onDestination) }
        }
        try await write(writes, in: context, changes: &changes, tally: &tally, report: &report)
        try snapshot.update(changes)
        return tally
    }

    /// Forgets the rows of `keys`, which `from` no longer lists, so a key that comes back is judged afresh.
    func forget(_ keys: [String]) throws(CloudSyncError) {
        guard !keys.isEmpty else { return }
        let held = try snapshot.rows(keys)
        guard !held.isEmpty else { return }
        try snapshot.update(keys.filter { held[StoreKey($0)] != nil }.map { ($0, nil) })
    }

    /// Reads `entries` at the source; answers the keys that may differ at the destination, having counted those the
    /// snapshot still vouches for (the destination's tag unchanged, the source's value the same) and failures.
    private func readSource(
        _ entries: [TwoSidedListing.Entry], rows: [StoreKey: MirrorRow], in context: JobContext,
        changes: inout RowChanges, tally: inout Tally, report: inout JobReport
    ) async throws(CloudSyncError) -> [Candidate] {
        let sourceValues = try await context.store.readEach(entries.map(\.key), from: from)
        var candidates: [Candidate] = []
        for (entry, read) in zip(entries, sourceValues) {
            let value: String
            switch read {
            case .failure(let error):
                report.record([KeyFailure(key: entry.key, error: error)])
                tally.failed += 1
                continue
            case .success(nil):
                // Gone from `from` since it was listed: the next run sees what to do about `to`.
                changes.append((entry.key, nil))
                tally.gone += 1
                continue
            case .success(let read?): value = read
            }
            let digest = SyncFingerprint.digest(of: value)
            let row = rows[StoreKey(entry.key)]
            // The destination's tag as the snapshot saw it, and the same value at the source: `to` still holds it.
            if entry.onDestination, let row, row.digest == digest, let destination = entry.destinationVersion,
                row.destinationVersion == destination
            {
                tally.unchanged += 1
                if row.sourceVersion != entry.sourceVersion {
                    changes.append(
                        (
                            entry.key,
                            MirrorRow(
                                digest: digest, sourceVersion: entry.sourceVersion, destinationVersion: destination)
                        ))
                }
                continue
            }
            candidates.append((entry, value, digest, entry.onDestination && row?.digest == digest))
        }
        return candidates
    }

    /// Reads at `to` the candidates it lists and answers those to write, each saying whether it replaces a value;
    /// one whose destination could not be read (other than undecodable) is left alone, since writing could replace a
    /// value no one has seen.
    private func differing(
        _ candidates: [Candidate], in context: JobContext, changes: inout RowChanges, tally: inout Tally,
        report: inout JobReport
    ) async throws(CloudSyncError) -> [(candidate: Candidate, update: Bool)] {
        let held = candidates.filter(\.entry.onDestination).map(\.entry.key)
        let heldValues = try await context.store.readEach(held, from: to)
        var destination: [StoreKey: Result<String?, CloudSyncError>] = [:]
        for (key, value) in zip(held, heldValues) { destination[StoreKey(key)] = value }
        var writes: [(candidate: Candidate, update: Bool)] = []
        for candidate in candidates {
            let (entry, value, digest, _) = candidate
            switch destination[StoreKey(entry.key)] {
            case .success(let current?)? where current.utf8.elementsEqual(value.utf8):
                tally.unchanged += 1
                changes.append(
                    (
                        entry.key,
                        MirrorRow(
                            digest: digest, sourceVersion: entry.sourceVersion,
                            destinationVersion: entry.destinationVersion)
                    ))
            case .failure(let error)? where error.code != .decode:
                report.record([KeyFailure(key: entry.key, error: error)])
                tally.failed += 1
                changes.append((entry.key, nil))
            case .some(.success(.some)), .some(.failure): writes.append((candidate, true))
            case .some(.success(nil)), nil: writes.append((candidate, false))
            }
        }
        return writes
    }

    /// Writes `writes` to `to` and records, for each that landed, the tag the destination answered for the new value
    /// (or its digest, where that is its tag); with neither, the tag is unknown until it is listed again.
    private func write(
        _ writes: [(candidate: Candidate, update: Bool)], in context: JobContext, changes: inout RowChanges,
        tally: inout Tally, report: inout JobReport
    ) async throws(CloudSyncError) {
        guard !writes.isEmpty else { return }
        let store = context.store
        let tagIsDigest = try store.listsWrittenValuesDigests(on: to)
        let values = writes.map { KeyValue($0.candidate.entry.key, $0.candidate.value) }
        for (write, outcome) in zip(writes, try await store.writeVersioned(values, to: to)) {
            let (entry, _, digest, _) = write.candidate
            switch outcome {
            case .success(let version):
                if write.update { tally.updated += 1 } else { tally.copied += 1 }
                changes.append(
                    (
                        entry.key,
                        MirrorRow(
                            digest: digest, sourceVersion: entry.sourceVersion,
                            destinationVersion: version ?? (tagIsDigest ? digest : nil))
                    ))
            case .failure(let error):
                report.record([KeyFailure(key: entry.key, error: error)])
                tally.failed += 1
                changes.append((entry.key, nil))
            }
        }
    }
}

/// A mirror or migrate job's rows in the state database.
///
/// They are kept under a name that holds both providers: renaming either side starts a snapshot afresh rather than
/// trusting one about other data. Without a state database (a dry run of a pipeline that never ran) there are no rows,
/// and every key is read.
struct MirrorSnapshot {
    let state: (any PipelineState)?
    let job: String

    init(state: (any PipelineState)?, job: String, from: String, to: String) {
        self.state = state
        self.job = "\(job)\u{1F}\(from)\u{1F}\(to)"
    }

    func rows(_ keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow] {
        try state?.mirrorRows(of: job, keys: keys) ?? [:]
    }

    func update(_ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        try state?.updateMirrorRows(of: job, rows)
    }
}
