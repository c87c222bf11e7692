import CloudSync

/// A pipeline's state, wherever it is kept: the history of its runs, its providers' account identities and kept
/// values (tokens, cursors), and the snapshots of its sync and mirror jobs.
///
/// CloudSyncPipelineState has two implementations: `StateDatabase`, a SQLite file in the state directory (the embedded
/// default), and `PostgresStateDatabase`, a schema in PostgreSQL that runners on several machines share, which also
/// offers ``SharedPipelineState`` through ``shared``. A ``PipelineStateStore`` opens each. All are synchronous,
/// as `ProviderStateStore` is: a provider keeps a rotated token from inside a call that has nowhere to await.
/// Every method throws `ERR_CONFIG` (or `ERR_OFFLINE` for a server that stopped answering) when the storage fails.
public protocol PipelineState: ProviderStateStore, AnyObject {
    /// Records a finished run (not in a read-only state).
    func record(_ run: RunRecord) throws(CloudSyncError)
    /// The last `limit` runs, newest first.
    func runs(limit: Int) throws(CloudSyncError) -> [RunRecord]
    /// The run recorded under `id`, if any.
    func run(id: String) throws(CloudSyncError) -> RunRecord?

    /// The account identity `provider` had when last seen, if it reports one.
    func identity(of provider: String) throws(CloudSyncError) -> String?
    /// Remembers `identity` as `provider`'s account.
    func remember(identity: String, of provider: String, at time: String) throws(CloudSyncError)

    /// Whether sync job `job` has finished a run before.
    func hasSynced(_ job: String) throws(CloudSyncError) -> Bool
    /// Records that `job` finished a run at `time`; with `cursors`, replaces its change-feed cursors by them at once.
    func markSynced(_ job: String, at time: String, cursors: [String: String]?) throws(CloudSyncError)
    /// The change-feed cursor each provider of `job` had when its last clean run began.
    func syncCursors(of job: String) throws(CloudSyncError) -> [String: String]
    /// The snapshot rows of `job` for these keys (those it has), in the order of `keys`.
    func snapshotRows(of job: String, keys: [String]) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    /// Up to `limit` snapshot rows of `job` after `key` (bytewise), in key order.
    func snapshotRows(of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    /// How many keys `job`'s snapshot holds.
    func snapshotCount(of job: String) throws(CloudSyncError) -> Int
    /// Replaces `job`'s rows for these keys at once: a nil fingerprint removes the row.
    func updateSnapshot(of job: String, _ rows: [(key: String, fingerprint: SyncFingerprint?)])
        throws(CloudSyncError)
    /// Replaces `job`'s rows for these keys and sets `deletions` aside, at once.
    func recordSyncProgress(
        of job: String, snapshot rows: [(key: String, fingerprint: SyncFingerprint?)], deletions: [String]
    ) throws(CloudSyncError)
    /// Forgets the deletions an earlier run of `job` set aside.
    func clearDeletions(of job: String) throws(CloudSyncError)
    /// Up to `limit` keys set aside for deletion after `key`, with their snapshot rows, in key order.
    func deletions(of job: String, after key: String?, limit: Int) throws(CloudSyncError) -> [SyncItem]

    /// Mirror job `job`'s rows for these keys (those it has).
    func mirrorRows(of job: String, keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow]
    /// Sets `job`'s rows for these keys at once; a nil row removes the key's.
    func updateMirrorRows(of job: String, _ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError)

    /// Where the pipeline's outbox is kept, for a run that writes: the entries the store could not deliver yet.
    func outboxStorage() throws -> any OutboxStorage
    /// The outbox's entries as they are, read without changing anything (a dry run works on a copy of them).
    func outboxEntries() throws -> [OutboxEntry]

    /// Lets go of the storage; later calls fail.
    func close()

    /// What the state can do for runners that share it (sharding, joining, the shared outbox, kept reports); nil
    /// for a state only one runner at a time uses.
    var shared: (any SharedPipelineState)? { get }
}

extension PipelineState {
    /// None: a state store that runners share says so by handing itself out here.
    public var shared: (any SharedPipelineState)? { nil }

    /// Records that `job` finished a run at `time`, leaving its cursors as they are.
    public func markSynced(_ job: String, at time: String) throws(CloudSyncError) {
        try markSynced(job, at: time, cursors: nil)
    }
}

/// What ``PipelineState/identity(of:)`` holds for a provider whose account no run could check yet: it equals no real
/// identity, so the first account a check finds counts as a change.
public let uncheckedIdentity = "\u{0}unchecked"

/// How both state implementations keep provider values: sealed with the pipeline's codec (the envelope's associated
/// key binds a value to its provider and name, so one cannot be swapped for another), and, in a read-only state,
/// set in memory for the session only.
package struct ProviderValueSeal: Sendable {
    package let codec: (any ValueCodec)?
    /// In a read-only state, the values set during the session; nil when values are stored.
    package let overlay: Protected<[String: String?]>?

    package init(codec: (any ValueCodec)?, readOnly: Bool) {
        self.codec = codec
        overlay = readOnly ? Protected([:]) : nil
    }

    /// The value of `name`: one set during a read-only session, else what `stored` reads, opened.
    package func value(provider: String, name: String, stored: () throws(CloudSyncError) -> String?)
        throws(CloudSyncError)
        -> String?
    {
        if let overlay, let value = overlay.withLock({ $0[provider + "/" + name] }) { return value }
        guard let sealed = try stored() else { return nil }
        return try open(sealed, provider: provider, name: name)
    }

    /// Keeps `value` (nil forgets it): in memory in a read-only session, else sealed and handed to `store`.
    package func setValue(
        _ value: String?, provider: String, name: String, store: (String?) throws(CloudSyncError) -> Void
    ) throws(CloudSyncError) {
        if let overlay {
            overlay.withLock { $0[provider + "/" + name] = .some(value) }
            return
        }
        try store(try value.map { (value) throws(CloudSyncError) in try seal(value, provider: provider, name: name) })
    }

    package func seal(_ value: String, provider: String, name: String) throws(CloudSyncError) -> String {
        guard let codec else { return value }
        do {
            return try codec.encode(value, key: Self.key(provider, name))
        } catch {
            throw CloudSyncError(
                .encode, "the state value \(name) could not be encrypted: \(error)", provider: provider)
        }
    }

    package func open(_ stored: String, provider: String, name: String) throws(CloudSyncError) -> String {
        guard let codec else { return stored }
        do {
            return try codec.decode(stored, key: Self.key(provider, name))
        } catch {
            throw CloudSyncError(
                .decode, "the state value \(name) could not be decrypted: \(error); was the codec's key changed?",
                provider: provider)
        }
    }

    private static func key(_ provider: String, _ name: String) -> String { "cloudsync.state/\(provider)/\(name)" }
}
