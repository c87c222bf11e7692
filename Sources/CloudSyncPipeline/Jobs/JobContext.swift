import CloudSync
import CloudSyncCrypto

/// What a running job may use: the store over the pipeline's providers, how the run was asked to run, and where it
/// reports progress.
public struct JobContext: Sendable {
    /// The store the pipeline compiled to; jobs reach single providers through its direct calls
    /// (`keyPage(of:after:limit:)`, `readEach(_:from:)`, `write(_:to:)`, `remove(_:from:)`).
    public let store: CloudStore
    /// The pipeline's name.
    public let pipeline: String
    /// The job's name.
    public let jobName: String
    /// The provider ids the store spans, in preference order.
    public let storeProviders: [String]
    /// Whether this is a dry run: providers are wrapped so writes are counted but never made.
    public let isDryRun: Bool
    /// Whether `--force` lets a deletion guard through for this run.
    public let isForced: Bool
    /// Whether `--yes` confirms destructive jobs.
    public let isConfirmed: Bool
    /// Whether `--read-unchanged` has sync jobs read every copy, whatever their listings' tags say.
    public var readsUnchanged = false
    /// A saved plan the job writes instead of changing anything, or applies.
    ///
    /// Set by `cloudsync plan --out` and `cloudsync apply`; nil for an ordinary run. Only job types with saved plans (`migrate`, `move`) get one.
    public var savedPlan: SavedPlanMode? = nil
    /// The run's clock (the store's): read the time here, never from the system, so tests can set it.
    public var clock: any StoreClock { store.clock }
    package let compiled: CompiledPipeline
    package let providers: [String: any Provider]
    /// The pipeline's state, where jobs keep what they remember between runs (sync and mirror snapshots).
    ///
    /// Nil in a dry run of a pipeline that never ran. A state several runners share offers more through
    /// ``PipelineState/shared``.
    public let state: (any PipelineState)?
    package let interrupt: InterruptFlag
    package let onProgress: (@Sendable (String, Int, Int?, String) -> Void)?
    /// The keys this run of the job covers: every key, or the range a sharded job's runner leased.
    public var range: KeyRange = .all
    /// The only keys the job may touch, besides what its fields select: the keys a migration rewrote, which its
    /// undo restores (`cloudsync migrations undo`); nil for every key its fields select.
    public var onlyKeys: Set<StoreKey>? = nil
    /// Where a sharded job's runner records each finished batch (its counts and last key); nil for a job run whole.
    package var shardProgress:
        (@Sendable (_ counts: [String: Int], _ lastKey: String, _ failures: [RunReport.Failure]) async -> Bool)? = nil
    /// Where a sharded job's ranges set keys aside for the step after every range (``JobType/finishSharded``);
    /// nil for a job run whole.
    package var setAside: SetAsideKeys? = nil

    /// What a job of `pipeline` named `jobName` may use; the runner makes one per job.
    package init(
        store: CloudStore, pipeline: String, jobName: String, storeProviders: [String], isDryRun: Bool,
        isForced: Bool, isConfirmed: Bool, compiled: CompiledPipeline, providers: [String: any Provider],
        state: (any PipelineState)?, interrupt: InterruptFlag,
        onProgress: (@Sendable (String, Int, Int?, String) -> Void)?
    ) {
        self.store = store
        self.pipeline = pipeline
        self.jobName = jobName
        self.storeProviders = storeProviders
        self.isDryRun = isDryRun
        self.isForced = isForced
        self.isConfirmed = isConfirmed
        self.compiled = compiled
        self.providers = providers
        self.state = state
        self.interrupt = interrupt
        self.onProgress = onProgress
    }

    /// Whether the run was interrupted: a job stops at its next batch boundary.
    public var isInterrupted: Bool { interrupt.isRaised }

    /// Records that a batch ending at `lastKey` (in key order) finished with these counts and named these failures
    /// (which the job records in its report as well).
    ///
    /// A runner taking the range over after this one stopped resumes after it, and the report still names the
    /// failures this one recorded. Returns false when this runner no longer holds the range (another took it over),
    /// and the job should stop. A job run whole records nothing and always goes on.
    public func batchDone(
        _ counts: [JobCount: Int], through lastKey: String, failures: [RunReport.Failure] = []
    ) async -> Bool {
        guard let shardProgress else { return true }
        var byName: [String: Int] = [:]
        for (count, value) in counts { byName[count.name] = value }
        return await shardProgress(byName, lastKey, failures)
    }

    /// Tells whoever watches the run how far the job is: `done` of `total` (when known) `unit`s (keys, packs).
    public func progress(_ done: Int, _ total: Int?, unit: String = "keys") { onProgress?(jobName, done, total, unit) }

    /// The codec the file declares as `id`, compiled with its keys.
    public func codec(_ id: String) -> EnvelopeCodec? { compiled.codecs[id] }

    /// Keys per page for a job over `ids` (`store` for the store's providers): the smallest multiple of every one's
    /// batch size that is at least `floor`, so each page splits into whole batches and the requests per key are the
    /// providers' minimum.
    public func pageSize(for ids: [String], floor: Int = 500) -> Int {
        var ids = ids.flatMap { $0 == "store" ? storeProviders : [$0] }
        if ids.isEmpty { ids = storeProviders }
        return BatchSizing.commonPage(of: ids.compactMap { providers[$0]?.capabilities.batchLimit }, floor: floor)
    }
}

/// What a job did, as it runs: its counts (only its type's), the keys that failed, and its status.
public struct JobReport: Sendable {
    /// The most failures a job's report lists by key; further ones are only counted in
    /// ``RunReport/Job/failuresOmitted``.
    public static let failureListLimit = 100

    package var entry: RunReport.Job
    private let declared: Set<String>

    package init(name: String, type: String, counts: [JobCount]) {
        declared = Set(counts.map(\.name))
        var zero: [String: Int] = [:]
        for count in counts { zero[count.name] = 0 }
        entry = RunReport.Job(
            name: name, type: type, status: .ok, counts: zero, failures: [], failuresOmitted: 0)
    }

    /// The value of `count`.
    public subscript(_ count: JobCount) -> Int {
        get { entry.counts[count.name] ?? 0 }
        set {
            precondition(
                declared.contains(count.name), "job type \(entry.type) does not declare the count \(count.name)")
            entry.counts[count.name] = newValue
        }
    }

    /// Adds `amount` to `count`.
    public mutating func add(_ amount: Int, to count: JobCount) { self[count] += amount }

    /// How the job ends: `ok` unless set; a job that recorded failures ends `failed` when it returns `ok`.
    public var status: JobStatus {
        get { entry.status }
        set { entry.status = newValue }
    }

    /// Why the job ended as it did, for a status other than `ok` that no single key explains.
    public var error: RunReport.Failure? {
        get { entry.error }
        set { entry.error = newValue }
    }

    /// The file the job wrote or read, as the pipeline names it.
    public var file: String? {
        get { entry.file }
        set { entry.file = newValue }
    }

    /// The snapshot the job wrote or read, by id.
    public var snapshot: String? {
        get { entry.snapshot }
        set { entry.snapshot = newValue }
    }

    /// Names each failure with its own key and error, the first ``JobReport/failureListLimit`` listed and the
    /// rest counted.
    public mutating func record(_ failures: [KeyFailure]) {
        for failure in failures {
            if entry.failures.count < JobReport.failureListLimit {
                entry.failures.append(RunReport.Failure(failure))
            } else {
                entry.failuresOmitted += 1
            }
        }
    }

    /// Counts failures that were not listed.
    package mutating func recordOmitted(_ count: Int) { entry.failuresOmitted += count }

    /// How many failures were recorded, listed or not.
    package var failureCount: Int { entry.failures.count + entry.failuresOmitted }
}

extension RunReport.Failure {
    /// The report's form of one key's failure.
    package init(_ failure: KeyFailure) {
        self.init(key: failure.key, failure.error)
    }

    /// The report's form of an error that stopped a whole job.
    package init(_ error: CloudSyncError) {
        self.init(key: "", error)
    }

    private init(key: String, _ error: CloudSyncError) {
        self.init(
            key: key, provider: error.provider, code: error.code.rawValue, message: error.message,
            serviceCode: error.context?.serviceCode, httpStatus: error.context?.httpStatus)
    }
}

extension JobContext {
    /// `filter` (a job's `keys`) narrowed to ``onlyKeys`` when they are set.
    public func selecting(_ filter: (@Sendable (String) -> Bool)?) -> (@Sendable (String) -> Bool)? {
        guard let onlyKeys else { return filter }
        return { key in onlyKeys.contains(StoreKey(key)) && (filter?(key) ?? true) }
    }
}
