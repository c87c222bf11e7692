import CloudSync
import CloudSyncPipeline
import Foundation

/// One run of a sync job: what its phases share.
final class SyncRun {
    /// Keys per page a sync reads, compares and writes; each page's snapshot rows commit together.
    static let pageSize = 1000
    /// Snapshot rows and deletions a sync collects before committing them (or after a second).
    static let commitRows = 20_000

    /// When the rows a phase collected are due to commit: every ``commitRows`` rows, once the rows spread over
    /// ``commitSpan`` keys, or a second after the last commit (each commit costs fsyncs; a run that stops loses at
    /// most what it collected since).
    struct CommitPacing {
        private let clock: any StoreClock
        private var last: Int64
        /// Keys walked when the last commit was made.
        private var lastWalked = 0

        init(clock: any StoreClock) {
            self.clock = clock
            last = clock.nowMilliseconds()
        }

        /// Whether `rows` collected by the time `walked` keys were walked are due.
        ///
        /// Rows spread thin over many keys (a few changes in a large snapshot) each dirty a page of their own, and a
        /// commit holds every page it dirties in the state database's cache: bounding the keys a commit spans bounds
        /// that memory, at one more commit per ``commitSpan`` keys only while rows are collected.
        func isDue(rows: Int, walked: Int = 0) -> Bool {
            rows >= SyncRun.commitRows || (rows > 0 && walked - lastWalked >= SyncRun.commitSpan)
                || clock.nowMilliseconds() - last >= 1_000
        }

        mutating func committed(walked: Int = 0) {
            last = clock.nowMilliseconds()
            lastWalked = walked
        }
    }
    /// The most keys a sync's commit of snapshot rows spans (see ``CommitPacing/isDue(rows:walked:)``).
    static let commitSpan = 50_000
    /// The most keys a report lists of a sync's deletions or conflicts.
    static let listLimit = 100

    let configuration: SyncJob.Configuration
    let ids: [String]
    let context: JobContext
    let job: String
    let state: (any PipelineState)?
    let firstRun: Bool
    let pageSize: Int
    var unlisted: [String: CloudSyncError] = [:]
    var sources: [OrderedKeys] = []
    var modes: [String: String] = [:]
    var fullBecause: [String: String] = [:]
    var newCursors: [String: String] = [:]
    /// Every listed provider reads from its feed: the keys changed anywhere are all there is to compare.
    var changedOnly = false
    var snapshotKeys = 0
    var deletionCount = 0
    var deletionKeys: [String] = []
    var conflicts: [RunReport.Conflict] = []
    /// Provider ids whose keys are unknown (not store keys).
    var unknown: Set<String> = []
    /// The merge's snapshot rows and deletions not committed yet, and when they are due.
    var pendingRows: [(key: String, fingerprint: SyncFingerprint?)] = []
    var pendingDeletions: [String] = []
    var pacing: CommitPacing
    /// A range's runner no longer holds its range (another took it over): the merge stops.
    var lostRange = false
    /// The merge counts keys whose listed tags their baselines record in sync as it takes them (see `takeNext`):
    /// not in a range (whose pages are recorded as done one by one), not when told to read unchanged keys, and not
    /// once a write waits in the outbox.
    var vouches = false
    /// The ids of ``sources``, positionally, once the merge begins.
    var sourceIDs: [String] = []

    /// A range of a sharded run (its runner set a range and where to set keys aside).
    let isRange: Bool

    /// `finishing`: the step after a sharded run's ranges, which keeps the deletions they collected.
    init(_ configuration: SyncJob.Configuration, ids: [String], context: JobContext, finishing: Bool = false)
        throws(CloudSyncError)
    {
        self.configuration = configuration
        self.ids = ids
        self.context = context
        job = context.jobName
        state = context.state
        firstRun = !((try state?.hasSynced(job)) ?? false)
        pageSize = context.pageSize(for: ids, floor: Self.pageSize)
        pacing = CommitPacing(clock: context.clock)
        isRange = context.setAside != nil
        // The ranges of one sharded run share the job's deletions; the run clears them when it starts.
        if !isRange && !finishing { try state?.clearDeletions(of: job) }
    }

    /// What a range hands the finishing step besides its counts: its conflicts and unlisted providers, as JSON.
    var rangeLists: [String: [String]] {
        let encoder = JSONEncoder.sorted
        let encode: (any Encodable) -> String = { String(decoding: (try? encoder.encode($0)) ?? Data(), as: UTF8.self) }
        return [
            SyncJob.conflictList: conflicts.map(encode),
            SyncJob.unlistedList: details.unlisted.map(encode),
        ]
    }

    /// Takes over what a sharded run's ranges found, for the deletions and the record of the whole job.
    func adopt(snapshotKeys: Int, deletions: Int, lists: [String: [String]]) throws(CloudSyncError) {
        self.snapshotKeys = snapshotKeys
        deletionCount = deletions
        let decoder = JSONDecoder()
        conflicts = (lists[SyncJob.conflictList] ?? []).compactMap {
            try? decoder.decode(RunReport.Conflict.self, from: Data($0.utf8))
        }
        for failure in (lists[SyncJob.unlistedList] ?? []).compactMap({
            try? decoder.decode(RunReport.Failure.self, from: Data($0.utf8))
        }) {
            guard let id = failure.provider, unlisted[id] == nil else { continue }
            unlisted[id] = CloudSyncError(ErrorCode(rawValue: failure.code), failure.message, provider: id)
        }
        unknown = Set(unlisted.keys)  // provider ids, not store keys
        deletionKeys = try state?.deletions(of: job, after: nil, limit: Self.listLimit).map(\.key) ?? []
    }

    /// Throws `ERR_NO_PROVIDER` naming why each provider was counted out, once none is left to compare.
    func requireAComparableProvider() throws(CloudSyncError) {
        guard !ids.isEmpty, ids.allSatisfy({ unknown.contains($0) }) else { return }
        let reasons = ids.map { id in "\(id) (\(unlisted[id]?.message ?? "left out"))" }
        throw CloudSyncError(
            .noProvider,
            "no provider is left to compare: \(reasons.joined(separator: "; ")); the next run compares these "
                + "keys again")
    }

    /// Counts providers a page was decided without (they answered unavailable when it began) as unlisted from here
    /// on: the run reports them, their copies stay unknown for the rest of the walk, and the feed cursors do not
    /// advance past keys they did not take.
    func leaveOut(_ answers: [String: Availability], from key: String) {
        for (id, answer) in answers where unlisted[id] == nil {
            unlisted[id] = CloudSyncError(
                .noProvider,
                "it became unavailable during the run (\(answer)); keys from \"\(key)\" on were compared without it "
                    + "and the next run compares them again",
                provider: id)
            unknown.insert(id)
        }
    }

    /// What the report says the job compared against, could not see, deleted and chose.
    var details: RunReport.SyncDetails {
        RunReport.SyncDetails(
            firstRun: firstRun, deletes: configuration.deletes.rawValue,
            maxDeletes: configuration.maxDeletes.description,
            unlisted: unlisted.sorted { $0.key < $1.key }.map { id, error in
                RunReport.Failure(key: "", provider: id, code: error.code.rawValue, message: error.message)
            }, conflicts: conflicts, deletions: deletionKeys,
            deletionsOmitted: max(0, deletionCount - deletionKeys.count),
            mode: changedOnly ? "incremental" : "full", modes: modes, fullBecause: fullBecause)
    }
}
