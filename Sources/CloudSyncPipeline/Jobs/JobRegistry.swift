import CloudSync

/// A registered job type, its concrete type erased.
public struct RegisteredJobType: Sendable {
    /// The `type` written in pipeline files.
    public let name: String
    /// One sentence for people: what the job does.
    public let summary: String
    /// Its own fields, besides ``RegisteredJobType/commonFields``.
    public let fields: [JobField]
    /// Every count its report may hold.
    public let counts: [JobCount]
    private let configure: @Sendable (JobFieldValues) throws -> ConfiguredJob

    /// The fields every job has, read by the loader itself (`type` aside).
    public static let commonFields: [(name: String, summary: String)] = [
        ("name", "names the job in reports, `--job` and `needs`; default: its position and type, like `2-migrate`"),
        (
            "needs",
            "names of earlier jobs that must end `ok` first; otherwise this job is skipped, its error naming the job "
                + "it waited for"
        ),
    ]

    init<Type: JobType>(_ type: Type) {
        name = type.name
        summary = type.summary
        fields = type.fields
        counts = type.counts
        let fields = type.fields
        configure = { values in
            // The providers the fields name themselves; `store` and `all` stand for the store, which fails over.
            let named = fields.flatMap { field -> [String] in
                switch (field.kind, values.values[field.name]) {
                case (.provider, .text(let id)?): return [id]
                case (.providerOrStore, .text(let id)?) where id != "store": return [id]
                case (.providerOrAll, .text(let id)?) where id != "all": return [id]
                case (.providers, .list(let ids)?): return ids
                default: return []
                }
            }
            return ConfiguredJob(
                type, try type.configuration(from: values), fields: values,
                availabilityChecked: type.checksAvailability ? named : [])
        }
    }

    /// Reads a configuration from checked field values.
    public func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> ConfiguredJob {
        do {
            return try configure(values)
        } catch let error as JobConfigurationError {
            throw error
        } catch {
            throw JobConfigurationError("\(error)")
        }
    }

    /// The field named `name`.
    public func field(named name: String) -> JobField? { fields.first { $0.name == name } }
}

/// A job type's configuration, checked and ready to run, its concrete type erased.
public struct ConfiguredJob: Sendable {
    /// The job type's name.
    public let type: String
    /// The counts its report holds.
    public let counts: [JobCount]
    /// Its fields as the file gave them (checked; defaults not filled in).
    public let fields: JobFieldValues
    /// The providers that must be available for it to start: those its fields name directly.
    package let availabilityChecked: [String]
    /// How it splits between runners; nil when it runs whole (`shards` absent or 1, or a type that cannot split).
    public let sharding: JobSharding?
    private let needed: @Sendable ([String]) -> [String]
    private let planned: @Sendable (PlanPaths) -> String
    private let warned: @Sendable ((String) -> ProviderCapabilities?) -> [String]
    private let runner: @Sendable (JobContext, inout JobReport) async throws(CloudSyncError) -> Void
    private let preparer: @Sendable (JobContext) throws(CloudSyncError) -> Void
    private let finisher: @Sendable (JobContext, [String: Int], inout JobReport) async throws(CloudSyncError) -> Void

    init<Type: JobType>(
        _ jobType: Type, _ configuration: Type.Configuration, fields: JobFieldValues, availabilityChecked: [String]
    ) {
        type = jobType.name
        counts = jobType.counts
        self.fields = fields
        self.availabilityChecked = availabilityChecked
        sharding = jobType.sharding(of: configuration).flatMap { $0.shards > 1 ? $0 : nil }
        needed = { store in jobType.providers(of: configuration, store: store) }
        planned = { paths in jobType.plan(configuration, paths: paths) }
        warned = { capabilities in jobType.warnings(configuration, capabilities: capabilities) }
        runner = { context, report throws(CloudSyncError) in
            try await jobType.run(configuration, in: context, report: &report)
        }
        preparer = { context throws(CloudSyncError) in try jobType.prepareSharded(configuration, in: context) }
        finisher = { context, summed, report throws(CloudSyncError) in
            try await jobType.finishSharded(configuration, in: context, summed: summed, report: &report)
        }
    }

    /// The providers it reads or writes, given the store's.
    public func providers(store: [String]) -> [String] { needed(store) }
    /// What it will do, in one line.
    public func plan(paths: PlanPaths) -> String { planned(paths) }
    /// What it cannot promise with these providers; see ``JobType/warnings(_:capabilities:)``.
    public func warnings(capabilities: (String) -> ProviderCapabilities?) -> [String] { warned(capabilities) }
    /// Runs it; see ``JobType/run(_:in:report:)``.
    package func run(in context: JobContext, report: inout JobReport) async throws(CloudSyncError) {
        try await runner(context, &report)
    }
    /// Readies a new sharded run; see ``JobType/prepareSharded(_:in:)``.
    package func prepareSharded(in context: JobContext) throws(CloudSyncError) { try preparer(context) }
    /// Finishes a sharded run; see ``JobType/finishSharded(_:in:summed:report:)``.
    package func finishSharded(in context: JobContext, summed: [String: Int], report: inout JobReport)
        async throws(CloudSyncError)
    {
        try await finisher(context, summed, &report)
    }
}

/// The job types a pipeline may name, by type name.
///
/// `cloudsync` uses `BuiltInJobs.registry`; a program embedding the pipeline runner starts from it and registers
/// its own types.
public struct JobRegistry: Sendable {
    private var byName: [String: RegisteredJobType] = [:]
    private var order: [String] = []

    /// An empty registry.
    public init() {}

    /// Adds `type`; a second type of one name replaces the first.
    public mutating func register<Type: JobType>(_ type: Type) {
        if byName[type.name] == nil { order.append(type.name) }
        byName[type.name] = RegisteredJobType(type)
    }

    /// Every registered type, in registration order.
    public var types: [RegisteredJobType] { order.compactMap { byName[$0] } }

    /// The type named `name`, if registered.
    public func type(named name: String) -> RegisteredJobType? { byName[name] }
}
