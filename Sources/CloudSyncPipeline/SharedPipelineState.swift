import CloudSync
import Foundation

/// What a state store that several runners share (the PostgreSQL one) can do beyond ``PipelineState``: sharded jobs
/// whose key ranges runners lease, keys ranges set aside, runs that other runners join, an outbox that every runner
/// of a run drains together, and reports kept with the history so any host can show any host's.
///
/// A state store offers it through ``PipelineState/shared``; the runner asks for it there and never needs to know
/// which store it has. Every method throws `ERR_CONFIG` (or `ERR_OFFLINE` for a server that stopped answering) when
/// the storage fails.
public protocol SharedPipelineState: PipelineState, SetAsideKeyStore {
    /// Where the state is, for messages: server and schema, never a password.
    var location: String { get }

    /// The id of the run that holds the pipeline's run lock now, when one does and named itself.
    func runUnderWay() throws(CloudSyncError) -> String?

    /// The run and plan of `job` when an earlier run left it sharded and unfinished.
    func unfinishedShardedJob(_ job: String) throws(CloudSyncError) -> (runID: String, plan: String)?
    /// The sharded jobs whose ranges are not all done.
    func shardedJobsUnderWay() throws(CloudSyncError) -> [String]
    /// Makes this run the owner of `job`'s unfinished ranges, which it resumes.
    func adoptShardedJob(_ job: String) throws(CloudSyncError)
    /// Records `job` as sharded into `ranges` for run `runID`, replacing whatever an earlier run left of it.
    func startShardedJob(_ job: String, runID: String, plan: String, ranges: [KeyRange], at time: String)
        throws(CloudSyncError)
    /// Leases a range of `job` no live runner holds to `runner` for `leaseMs`; nil when none is left.
    func leaseShard(_ job: String, runner: String, leaseMs: Int64) throws(CloudSyncError) -> LeasedShard?
    /// Records a finished batch of range `shard`: `lastKey` done, `counts` added to `runner`'s, the lease renewed,
    /// all at once; false (and nothing recorded) when `runner` no longer holds the range.
    func recordShardBatch(
        _ job: String, shard: Int, runner: String, counts: [String: Int], lastKey: String?,
        failures: [RunReport.Failure], leaseMs: Int64
    ) throws(CloudSyncError) -> Bool
    /// Marks range `shard` done by `runner` with the failures its run named, the keys it listed by count name and,
    /// for a range that could not run, why; false when `runner` no longer held it.
    func finishShard(
        _ job: String, shard: Int, runner: String, failures: [RunReport.Failure], omitted: Int,
        keyLists: [String: [String]]?, error: String?  // by count name, not store keys
    ) throws(CloudSyncError) -> Bool
    /// Renews `runner`'s lease of range `shard` for `leaseMs`; false when it no longer holds it.
    func renewShardLease(_ job: String, shard: Int, runner: String, leaseMs: Int64) throws(CloudSyncError) -> Bool
    /// Where `job`'s ranges stand.
    func shardStanding(_ job: String) throws(CloudSyncError) -> ShardStanding
    /// What `job`'s runners did, read once every range is done, and the job forgotten.
    func finishShardedJob(_ job: String) throws(CloudSyncError) -> ShardOutcome

    /// A session of its own for the outbox drain every runner of a run shares.
    func openOutboxDrain() async throws(CloudSyncError) -> any SharedOutboxDrainSession

    /// Keeps `json`, the report of run `id`, with its history row (recorded before).
    func keepReport(_ json: String, of id: String) throws(CloudSyncError)
    /// The report of run `id` as kept with its history; nil when none is.
    func report(of id: String) throws(CloudSyncError) -> Data?
    /// The reports kept with the last `limit` runs that have one, newest first.
    func recentReports(limit: Int) throws(CloudSyncError) -> [Data]
    /// Claims the schedule's slot at `slotMs` (milliseconds since 1970) for `host`: true when this call got it,
    /// false when another host had it, so each slot runs once across the hosts serving the pipeline.
    func claimSlot(_ slotMs: Int64, host: String) throws(CloudSyncError) -> Bool
}

/// One runner's session on the outbox drain that every runner of a run shares: entries are claimed in batches no
/// other runner holds, delivered, and their outcome stored before they are let go; closing waits for every claim in
/// flight, so when ``finish()`` returns no runner delivers any more.
public protocol SharedOutboxDrainSession: Sendable {
    /// Opens the drain for run `runID`, forgetting an earlier run's counts: it hands out entries due by `dueBy` (on
    /// the starter's clock, for every runner), none for `held` providers.
    func start(runID: String, held: [String], dueBy: Int64, at time: String) async throws(CloudSyncError)
    /// Whether the drain is open.
    func isOpen() async throws(CloudSyncError) -> Bool
    /// Claims up to `limit` due entries (none of `excluding`'s providers, none another runner holds), hands them to
    /// `settle` while they stay claimed, and stores what it decided with `runner`'s counts, all at once; returns how
    /// many it claimed, 0 when none was left, nil when the drain is closed.
    func claim(
        limit: Int, excluding: [String], runner: String, settle: ([OutboxEntry]) async -> DrainSettlement
    ) async throws(CloudSyncError) -> Int?
    /// Closes the drain once every claim in flight has ended; returns what each runner counted, by count name.
    func finish() async throws(CloudSyncError) -> [String: [String: Int]]
    /// Ends the session; an open claim is given back.
    func close() async
}

/// One key range of a sharded job, as a runner leased it.
public struct LeasedShard: Sendable, Equatable {
    /// Its number, from 0.
    public var shard: Int
    /// The keys left to do: after the range's start or the last key recorded done, through its end.
    public var range: KeyRange
    /// The runner that held it before, when this lease took it over from a runner that stopped.
    public var takenOverFrom: String?

    /// One with every field given.
    public init(shard: Int, range: KeyRange, takenOverFrom: String? = nil) {
        self.shard = shard
        self.range = range
        self.takenOverFrom = takenOverFrom
    }
}

/// Where a sharded job stands.
public struct ShardStanding: Sendable, Equatable {
    /// How many ranges the job has.
    public var shards: Int
    /// How many of them are done.
    public var done: Int
    /// Ranges no live runner holds now: a runner that joins (or the one that started) may take them.
    public var leasable: Int

    /// One with every field given.
    public init(shards: Int, done: Int, leasable: Int) {
        self.shards = shards
        self.done = done
        self.leasable = leasable
    }
}

/// What a sharded job's runners did, read once every range is done.
public struct ShardOutcome: Sendable {
    /// Counts by runner, then by count name.
    public var counts: [String: [String: Int]]
    /// Ranges each runner finished.
    public var finished: [String: Int]
    /// Ranges a runner took over from one that stopped.
    public var takenOver: Int
    /// The failures each range's runners named, in range order.
    public var failures: [RunReport.Failure]
    /// Failures the ranges counted without naming them.
    public var failuresOmitted: Int
    /// The keys each range's runner listed by kind (`check`'s differences), joined in range order and cut to the
    /// report's limit (100) each; nil for a job that lists none.
    public var keyLists: [String: [String]]? = nil  // by count name, not store keys
    /// Why ranges ended in error, by range.
    public var errors: [Int: String]

    /// One with every field given.
    public init(
        counts: [String: [String: Int]], finished: [String: Int], takenOver: Int, failures: [RunReport.Failure],
        failuresOmitted: Int,
        keyLists: [String: [String]]? = nil,  // by count name, not store keys
        errors: [Int: String]
    ) {
        self.counts = counts
        self.finished = finished
        self.takenOver = takenOver
        self.failures = failures
        self.failuresOmitted = failuresOmitted
        self.keyLists = keyLists
        self.errors = errors
    }
}

/// What a runner did with the entries it claimed: which rows go, which stay with a new schedule, and what it counts.
public struct DrainSettlement: Sendable {
    /// Rows to remove: delivered or given up.
    public var removed: [Int64] = []
    /// Rows that stay, with one more attempt counted and their next one scheduled.
    public var rescheduled: [OutboxEntry] = []
    /// `drained`, and `dropped.REASON` for each reason entries were given up for.
    public var counts: [String: Int] = [:]

    /// One with every field given.
    public init(removed: [Int64] = [], rescheduled: [OutboxEntry] = [], counts: [String: Int] = [:]) {
        self.removed = removed
        self.rescheduled = rescheduled
        self.counts = counts
    }
}
