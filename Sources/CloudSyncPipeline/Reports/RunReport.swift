import CloudSync
import Foundation

/// How a whole run ended; the command line maps it to an exit status.
public enum RunStatus: String, Codable, Sendable, CaseIterable {
    /// Every job ran and succeeded.
    case ok
    /// A job finished with failed keys or a quota warning under `failOnWarning`.
    case failed
    /// A job could not run at all.
    case error
    /// Every job succeeded, but writes wait in the outbox for a provider that could not take them yet.
    case queued
    /// Stopped by SIGINT or SIGTERM.
    case interrupted
}

/// How one job ended.
public enum JobStatus: String, Codable, Sendable, CaseIterable {
    /// It ran and every key succeeded.
    case ok
    /// Some keys failed, or a quota warning under `failOnWarning`.
    case failed
    /// It could not run (see the job's `error`).
    case error
    /// Stopped after a batch by a signal.
    case interrupted
    /// Not run: the run was interrupted first, or a job it needs did not end `ok` (its `error` names which).
    case skipped
}

/// The JSON report of one run (`schemas/report.schema.json`).
///
/// Holds keys, ids, codes and counts, never values or
/// secrets.
public struct RunReport: Codable, Sendable {
    /// One key that failed, or why a whole job could not run.
    public struct Failure: Codable, Sendable, Equatable {
        /// The key that failed; empty when the failure is the whole job's.
        public var key: String
        /// The provider that failed it; nil when no single provider did.
        public var provider: String?
        /// The error's code (`ERR_OFFLINE`, `ERR_DECODE`, ...), for machines to branch on.
        public var code: String
        /// What went wrong and what to do, for people; never a value or a secret.
        public var message: String
        /// The service's own code for it (S3's `SlowDown`, Drive's `storageQuotaExceeded`, CloudKit's
        /// `QUOTA_EXCEEDED`), when a service answered; absent otherwise.
        public var serviceCode: String?
        /// The HTTP status of that answer, when there was one.
        public var httpStatus: Int?

        /// A failure of `key` (empty for a whole job's) at `provider`, with the store's `code` and what the service
        /// said, where one answered.
        public init(
            key: String, provider: String?, code: String, message: String, serviceCode: String? = nil,
            httpStatus: Int? = nil
        ) {
            self.key = key
            self.provider = provider
            self.code = code
            self.message = message
            self.serviceCode = serviceCode
            self.httpStatus = httpStatus
        }
    }

    /// One provider's space, as a `quota` job read it.
    public struct QuotaLine: Codable, Sendable, Equatable {
        /// The provider's id.
        public var provider: String
        /// Bytes used; nil when the provider cannot know.
        public var usedBytes: Int64?
        /// Absent means unlimited.
        public var totalBytes: Int64?
        /// `usedBytes / totalBytes`; nil when either is unknown (an unlimited provider has none).
        public var fraction: Double?
        /// Whether ``fraction`` is above the job's `warnAbove` (above 1 when it sets none).
        public var warning: Bool

        /// One with every field given.
        package init(
            provider: String, usedBytes: Int64? = nil, totalBytes: Int64? = nil, fraction: Double? = nil, warning: Bool
        ) {
            self.provider = provider
            self.usedBytes = usedBytes
            self.totalBytes = totalBytes
            self.fraction = fraction
            self.warning = warning
        }
    }

    /// How one job ended and what it did.
    public struct Job: Codable, Sendable {
        /// The job's unique name in the pipeline.
        public var name: String
        /// The job type (`sync`, `migrate`, ...).
        public var type: String
        /// How the job ended.
        public var status: JobStatus
        /// What the job did: exactly the counts its type declares (``JobType/counts``), by name; empty for a job
        /// that was skipped.
        public var counts: [String: Int]
        /// The first ``JobReport/failureListLimit`` keys that failed, in the order they failed.
        public var failures: [Failure]
        /// Failures beyond the first 100, counted but not listed.
        public var failuresOmitted: Int
        /// Why the job could not run, for status `error`; for a sync with status `failed`, also why it deleted
        /// nothing (`ERR_TOO_MANY_DELETES`).
        public var error: Failure?
        /// Each provider's space, for a `quota` job; nil for other jobs.
        public var quota: [QuotaLine]?
        /// The file an export wrote or an import read.
        public var file: String?
        /// The snapshot a `backup` wrote or a `restore` read, by id.
        public var snapshot: String? = nil
        /// What a `sync` job compared against and decided; nil for other jobs.
        public var sync: SyncDetails? = nil
        /// Keys named by category, the first 100 of each; names only, never values.
        ///
        /// `check` names `differ`, `missingOnDestination` and `missingOnSource`, `mirror` names `deleted`, `forget`
        /// the snapshot ids `kept` and `removed`; nil for other jobs.
        public var keyLists: [String: [String]]? = nil  // by count name, not store keys
        /// How a job with `shards: N` was split between runners; nil for a job run whole.
        public var shards: Shards? = nil

        /// One with every field given.
        package init(
            name: String, type: String, status: JobStatus, counts: [String: Int], failures: [Failure],
            failuresOmitted: Int, error: Failure? = nil, quota: [QuotaLine]? = nil, file: String? = nil,
            snapshot: String? = nil, sync: SyncDetails? = nil,
            keyLists: [String: [String]]? = nil,  // by count name, not store keys
            shards: Shards? = nil
        ) {
            self.name = name
            self.type = type
            self.status = status
            self.counts = counts
            self.failures = failures
            self.failuresOmitted = failuresOmitted
            self.error = error
            self.quota = quota
            self.file = file
            self.snapshot = snapshot
            self.sync = sync
            self.keyLists = keyLists
            self.shards = shards
        }
    }

    /// How a sharded job's key ranges were shared out: each runner's counts beside the job's sums.
    public struct Shards: Codable, Sendable, Equatable {
        /// How many ranges the job was split into.
        public var count: Int
        /// Ranges a runner took over from one that stopped (killed, disconnected, or past its lease), resuming after
        /// the last batch that runner recorded.
        public var takenOver: Int
        /// The run whose ranges this one finished, when an earlier run of the same job stopped before its last range.
        public var resumedRun: String?
        /// Every runner that recorded work, by name (`host/pid`).
        public var runners: [ShardRunner]

        /// One with every field given.
        package init(count: Int, takenOver: Int, resumedRun: String? = nil, runners: [ShardRunner]) {
            self.count = count
            self.takenOver = takenOver
            self.resumedRun = resumedRun
            self.runners = runners
        }
    }

    /// What one runner did for a sharded job.
    public struct ShardRunner: Codable, Sendable, Equatable {
        /// `host/pid`.
        public var runner: String
        /// Ranges it finished.
        public var ranges: Int
        /// Its share of the job's counts.
        public var counts: [String: Int]

        /// One with every field given.
        package init(runner: String, ranges: Int, counts: [String: Int]) {
            self.runner = runner
            self.ranges = ranges
            self.counts = counts
        }
    }

    /// What a sync job compared against, what it could not see, and what it deleted or chose.
    public struct SyncDetails: Codable, Sendable, Equatable {
        /// Whether the job had no snapshot from an earlier run, so it took the union of every provider's keys and
        /// deleted nothing.
        public var firstRun: Bool
        /// The job's `deletes` setting: `propagate` or `ignore`.
        public var deletes: String
        /// The job's `maxDeletes` setting, as a count or a percentage.
        public var maxDeletes: String
        /// Providers that could not be listed: their keys were neither deleted nor read, and their snapshot rows
        /// were kept.
        public var unlisted: [Failure]
        /// The first 100 keys edited on one provider and deleted or edited on another since the last sync.
        public var conflicts: [Conflict]
        /// The first 100 keys deleted everywhere (or that would be, in a dry run or past the guard).
        public var deletions: [String]
        /// Deleted keys beyond the first 100.
        public var deletionsOmitted: Int
        /// What the run compared: `incremental` (only the keys every provider's change feed named since the last
        /// clean run) or `full` (some provider's whole listing against the snapshot; `fullBecause` says why).
        public var mode: String? = nil
        /// How each provider's keys were found: `incremental` (from its change feed since the last clean run) or
        /// `full` (its whole listing against the snapshot).
        public var modes: [String: String]? = nil
        /// Why a provider was compared in full (the job says `incremental: false`, no change feed, no cursor yet,
        /// cursor expired).
        public var fullBecause: [String: String]? = nil

        /// One with every field given.
        package init(
            firstRun: Bool, deletes: String, maxDeletes: String, unlisted: [Failure], conflicts: [Conflict],
            deletions: [String], deletionsOmitted: Int, mode: String? = nil, modes: [String: String]? = nil,
            fullBecause: [String: String]? = nil
        ) {
            self.mode = mode
            self.firstRun = firstRun
            self.deletes = deletes
            self.maxDeletes = maxDeletes
            self.unlisted = unlisted
            self.conflicts = conflicts
            self.deletions = deletions
            self.deletionsOmitted = deletionsOmitted
            self.modes = modes
            self.fullBecause = fullBecause
        }
    }

    /// A key whose copies changed on several sides since the last sync.
    public struct Conflict: Codable, Sendable, Equatable {
        /// The key.
        public var key: String
        /// `editedAndDeleted` (the edit won and the key came back) or `editedOnSeveral` (the resolver, or the
        /// preference order without one, chose).
        public var kind: String
        /// Providers whose copy changed.
        public var editedOn: [String]
        /// Providers that deleted it.
        public var deletedOn: [String]

        /// One with every field given.
        package init(key: String, kind: String, editedOn: [String], deletedOn: [String]) {
            self.key = key
            self.kind = kind
            self.editedOn = editedOn
            self.deletedOn = deletedOn
        }
    }

    /// What the outbox did during the run: it drains before the first job, and jobs may queue more.
    public struct Outbox: Codable, Sendable {
        /// Entries waiting when the run started.
        public var pendingBefore: Int
        /// Entries delivered by the drain before the first job.
        public var drained: Int
        /// Entries given up during the run, by reason (`notRetryable`, `tooManyAttempts`, `expired`, `queueFull`, ...).
        public var dropped: [String: Int]
        /// Entries still waiting when the run ended.
        public var pendingAfter: Int
        /// With the state in PostgreSQL, the entries each runner of the run delivered in the drain, by runner
        /// (`host/pid`); they sum to ``drained``.
        public var drainedBy: [String: Int]? = nil
        /// The entries still waiting when the run ended, by the provider they wait for; nil in reports written before
        /// it was kept.
        public var pendingByProvider: [String: Int]? = nil

        /// One with every field given.
        package init(
            pendingBefore: Int, drained: Int, dropped: [String: Int], pendingAfter: Int,
            drainedBy: [String: Int]? = nil, pendingByProvider: [String: Int]? = nil
        ) {
            self.pendingBefore = pendingBefore
            self.drained = drained
            self.dropped = dropped
            self.pendingAfter = pendingAfter
            self.drainedBy = drainedBy
            self.pendingByProvider = pendingByProvider
        }
    }

    /// One provider the pipeline declares, as the run ended, with what it cost.
    public struct Provider: Codable, Sendable {
        /// The provider's id.
        public var id: String
        /// The provider type.
        public var type: String
        /// Whether it was available when the run ended.
        public var available: Bool
        /// Why it was unavailable when the run ended (absent when available).
        public var unavailable: Unavailable?
        /// Requests the provider made, counted where they happen: one HTTP request or local call counts once.
        public var requests: Int
        /// Bytes of values it read.
        public var bytesRead: Int
        /// Bytes of values it wrote.
        public var bytesWritten: Int
        /// Requests sent again after a failure that may pass.
        public var retries: Int
        /// Answers that asked for fewer requests.
        public var throttled: Int
        /// Surplus copies of keys the provider found (Drive files sharing a key's name); absent when none.
        public var duplicates: Int?
        /// HTTP requests by method and outcome (`GET 2xx`, `PUT 5xx`, `POST failed` when no answer came); absent for
        /// providers that make none.
        public var httpRequests: [String: Int]? = nil
        /// Milliseconds its requests spent waiting for a concurrency slot or in backoff before a retry; absent for
        /// providers that make no HTTP requests.
        public var waitMs: Int64? = nil
        /// Writes queued for this provider that the run kept back because it could not check who is signed in;
        /// absent when none were.
        public var outboxHeld: OutboxHeld? = nil

        /// One with every field given.
        package init(
            id: String, type: String, available: Bool, unavailable: Unavailable? = nil, requests: Int, bytesRead: Int,
            bytesWritten: Int, retries: Int, throttled: Int, duplicates: Int? = nil, httpRequests: [String: Int]? = nil,
            waitMs: Int64? = nil, outboxHeld: OutboxHeld? = nil
        ) {
            self.id = id
            self.type = type
            self.available = available
            self.unavailable = unavailable
            self.requests = requests
            self.bytesRead = bytesRead
            self.bytesWritten = bytesWritten
            self.retries = retries
            self.throttled = throttled
            self.duplicates = duplicates
            self.httpRequests = httpRequests
            self.waitMs = waitMs
            self.outboxHeld = outboxHeld
        }
    }

    /// Queued writes a run did not send because it could not check the provider's account.
    ///
    /// An earlier run recorded who was signed in; while the account cannot be checked, whoever is signed in now may
    /// be someone else, so the writes stay queued, untouched, for a run that can check.
    public struct OutboxHeld: Codable, Sendable, Equatable {
        /// How many queued writes were kept back.
        public var entries: Int
        /// The code of the error the account check failed with.
        public var code: String
        /// Why, and what to do, for people.
        public var message: String

        /// One with every field given.
        package init(entries: Int, code: String, message: String) {
            self.entries = entries
            self.code = code
            self.message = message
        }
    }

    /// Why a provider was unavailable.
    public struct Unavailable: Codable, Sendable, Equatable {
        /// Why, for machines.
        public var reason: UnavailableReason
        /// `<reason>: <what to do>`, for people.
        public var message: String

        /// One with every field given.
        package init(reason: UnavailableReason, message: String) {
            self.reason = reason
            self.message = message
        }
    }

    /// The pipeline's name.
    public var pipeline: String
    /// Unique per run: `<pipeline>-<start in ms since 1970>-<pid>`.
    public var runId: String
    /// How the whole run ended.
    public var status: RunStatus
    /// Whether this was a dry run, which changed nothing.
    public var dryRun: Bool
    /// When the run started, ISO 8601 in UTC.
    public var startedAt: String
    /// When the run ended, ISO 8601 in UTC.
    public var finishedAt: String
    /// How long the run took, in milliseconds.
    public var durationMs: Int64
    /// Every selected job, in run order, skipped ones included.
    public var jobs: [Job]
    /// What the outbox did.
    public var outbox: Outbox
    /// Every provider the file declares, with its availability and what it cost.
    public var providers: [Provider]
    /// The store's deadline of each provider call in this run, in milliseconds; 0 for none.
    ///
    /// The file's `store.timeoutMs`, else `CLOUDSYNC_TIMEOUT_MS`, else 15000; nil in reports written before it was
    /// recorded.
    public var timeoutMs: Int? = nil
    /// Why the run could not start at all (its state directory, outbox or state database could not be opened);
    /// every job is then `skipped`.
    public var error: Failure? = nil

    /// Sorted keys, so reports diff cleanly.
    public func json() -> String {
        String(decoding: (try? JSONEncoder.sorted.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }

    /// One with every field given.
    package init(
        pipeline: String, runId: String, status: RunStatus, dryRun: Bool, startedAt: String, finishedAt: String,
        durationMs: Int64, jobs: [Job], outbox: Outbox, providers: [Provider], timeoutMs: Int? = nil,
        error: Failure? = nil
    ) {
        self.pipeline = pipeline
        self.runId = runId
        self.status = status
        self.dryRun = dryRun
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.durationMs = durationMs
        self.jobs = jobs
        self.outbox = outbox
        self.providers = providers
        self.timeoutMs = timeoutMs
        self.error = error
    }
}
