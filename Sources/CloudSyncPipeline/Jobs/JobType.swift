import CloudSync
import CloudSyncBackup

/// One field a job type accepts in a pipeline file: its name, what it takes, its default and what it means.
///
/// The loader reads and checks a job's fields from these descriptions (references to providers and codecs
/// included), and `cloudsync plan`, the pipeline JSON Schema and the job reference in the documentation are derived
/// from them, so a job type is described once, in the file that implements it.
public struct JobField: Sendable, Equatable {
    /// What values the field takes.
    public enum Kind: Sendable, Equatable {
        /// The id of a provider the file declares.
        case provider
        /// A provider id, or `store` for the whole store.
        case providerOrStore
        /// A provider id, or `all` for every provider of the store.
        case providerOrAll
        /// A list of provider ids.
        case providers
        /// The id of a codec the file declares.
        case codec
        /// A glob or a list of globs selecting keys.
        case keys
        /// A file path; relative paths resolve against the pipeline file's directory.
        case path
        /// `true` or `false`.
        case boolean
        /// A number from 0 to 1.
        case fraction
        /// A whole number in this range.
        case count(ClosedRange<Int>)
        /// One of a fixed set of words.
        case choice([String])
        /// A whole number of keys (at least 0) or a percentage like `"50%"`.
        case deleteLimit
        /// Any text (a snapshot's id or time, a name).
        case text
        /// A word or a list of words (tags).
        case words
        /// Which backup snapshots to keep: a mapping of `last`, `hourly`, `daily`, `weekly`, `monthly`, `yearly`
        /// (counts) and `within` (a duration like `30d`), at least one of them.
        case keepPolicy
        /// A key rename: a mapping of `from` (a pattern whose `*` capture) and `to` (naming the captures `{1}`, `{2}`).
        case rename
        /// A jq program, compiled when the file loads.
        case jqProgram
    }

    /// The field's name in the file.
    public var name: String
    /// The values it takes.
    public var kind: Kind
    /// Whether a job of this type must give it.
    public var required: Bool
    /// The value used when the field is absent, as written in a file; nil when there is none.
    public var defaultValue: String?
    /// One sentence for people: what the field means.
    public var summary: String

    /// A field description; see the properties for what each argument means.
    public init(_ name: String, _ kind: Kind, required: Bool = false, defaultValue: String? = nil, summary: String) {
        self.name = name
        self.kind = kind
        self.required = required
        self.defaultValue = defaultValue
        self.summary = summary
    }
}

/// A job field's value as the loader read and checked it against its ``JobField``.
public enum JobFieldValue: Sendable, Equatable {
    /// A provider or codec id, `store`, `all`, a word of a choice, or any text.
    case text(String)
    /// A path, resolved against the pipeline file's directory, remembering how it was written.
    case path(Interpolated)
    case boolean(Bool)
    case number(Double)
    /// Provider ids, key globs or words, in file order.
    case list([String])
    case deleteLimit(DeleteLimit)
    case keepPolicy(KeepPolicy)
    case rename(KeyRename)
}

/// The checked values of one job's fields, by name; an absent field is missing (defaults are the job type's).
public struct JobFieldValues: Sendable, Equatable {
    /// Values by field name.
    public var values: [String: JobFieldValue]
    /// Whether these are a migration's step that rewrites keys where they are (`migrations:`).
    ///
    /// Then `from` and `to` name the same provider, and the job runs only through a plan made whole before it writes.
    /// A file's `jobs` never set it.
    public var inPlace = false

    /// Values by field name.
    public init(_ values: [String: JobFieldValue] = [:], inPlace: Bool = false) {
        self.values = values
        self.inPlace = inPlace
    }

    /// The text of `name` (an id or a word), if given.
    public func text(_ name: String) -> String? {
        if case .text(let value) = values[name] { return value }
        return nil
    }

    /// The path of `name`, if given.
    public func path(_ name: String) -> Interpolated? {
        if case .path(let value) = values[name] { return value }
        return nil
    }

    /// The boolean of `name`, if given.
    public func boolean(_ name: String) -> Bool? {
        if case .boolean(let value) = values[name] { return value }
        return nil
    }

    /// The number of `name`, if given.
    public func number(_ name: String) -> Double? {
        if case .number(let value) = values[name] { return value }
        return nil
    }

    /// `from` and `to`, which must name two different providers: `sameProvider` says why not (the error is at `to`).
    public func twoProviders(_ sameProvider: String) throws(JobConfigurationError) -> (from: String, to: String) {
        let from = text("from") ?? ""
        let to = text("to") ?? ""
        guard from != to || inPlace else { throw JobConfigurationError(field: "to", sameProvider) }
        return (from, to)
    }

    /// The list of `name` (provider ids, key globs), if given.
    public func list(_ name: String) -> [String]? {
        if case .list(let value) = values[name] { return value }
        return nil
    }

    /// The deletion limit of `name`, if given.
    public func deleteLimit(_ name: String) -> DeleteLimit? {
        if case .deleteLimit(let value) = values[name] { return value }
        return nil
    }

    /// The keep policy of `name`, if given.
    public func keepPolicy(_ name: String) -> KeepPolicy? {
        if case .keepPolicy(let value) = values[name] { return value }
        return nil
    }

    /// The key rename of `name`, if given.
    public func rename(_ name: String) -> KeyRename? {
        if case .rename(let value) = values[name] { return value }
        return nil
    }

    /// The choice of `name` as `T`, or `fallback` when absent.
    public func choice<T: RawRepresentable>(_ name: String, default fallback: T) -> T where T.RawValue == String {
        text(name).flatMap(T.init(rawValue:)) ?? fallback
    }
}

/// One count a job type reports, with what it counts; a job's report holds exactly its type's counts.
public struct JobCount: Sendable, Hashable {
    /// The count's name in the report's `counts`.
    public var name: String
    /// One sentence for people: what it counts.
    public var summary: String

    /// A count named `name` that counts what `summary` says.
    public init(_ name: String, _ summary: String) {
        self.name = name
        self.summary = summary
    }

    /// Counts that only one way of running a job can make other than 0 (`changedSincePlan`, by `cloudsync apply`):
    /// reports always hold them, and a job's line of text leaves them out while they are 0.
    public static let shownWhenNonZero: Set<String> = ["changedSincePlan"]
}

/// Why a job's fields, each valid alone, do not make a job (two fields that must differ, a combination that means
/// nothing).
public struct JobConfigurationError: Error, Sendable, Equatable {
    /// The field the error is about, or nil for the job as a whole.
    public var field: String?
    /// What is wrong and what to do.
    public var message: String

    /// An error about `field` (nil: the whole job).
    public init(field: String? = nil, _ message: String) {
        self.field = field
        self.message = message
    }
}

/// Everything about one job type: its name, its fields and counts, how its configuration is read from the fields,
/// which providers it needs, how `plan` describes it, and how it runs.
///
/// Each built-in type lives in a file of its own in CloudSyncJobs and is listed once in its `BuiltInJobs`; a program
/// running pipelines from Swift registers its own types in a ``JobRegistry`` the same way, and nothing else needs to
/// know the type exists.
public protocol JobType: Sendable {
    /// The job's typed configuration, read from its fields.
    associatedtype Configuration: Sendable

    /// The `type` written in pipeline files.
    var name: String { get }
    /// One sentence for people: what the job does.
    var summary: String { get }
    /// The fields it accepts besides the ones every job has (`type`, `name`, `needs`).
    var fields: [JobField] { get }
    /// Every count its report may hold, in the order people read them.
    var counts: [JobCount] { get }

    /// The configuration the checked field values describe; field-by-field checks (kinds, references, required)
    /// have already passed.
    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration
    /// The providers the job reads or writes, given the store's providers; the job does not run (it ends `error`)
    /// while one of them could not be opened, or while one its fields name directly (not through `store` or
    /// `all`, whose writes fail over and queue) is unavailable, unless ``checksAvailability`` is false.
    func providers(of configuration: Configuration, store: [String]) -> [String]
    /// Whether the runner refuses to start the job while a provider its fields name is unavailable (true); a type
    /// that copes with an unavailable provider itself (`sync` leaves it out and says so) returns false.
    var checksAvailability: Bool { get }
    /// What the job will do, in one line for people (`cloudsync plan`); paths through `paths`, never a secret.
    func plan(_ configuration: Configuration, paths: PlanPaths) -> String
    /// Sentences about what the job cannot promise with the providers it names, whose capabilities `capabilities`
    /// gives by id (nil for an id that names no provider): `cloudsync validate`, `plan` and every `run` show them.
    func warnings(_ configuration: Configuration, capabilities: (String) -> ProviderCapabilities?) -> [String]
    /// Runs the job, recording what it did in `report`; throwing ends the job `error` with that error.
    ///
    /// A sharded job's runner runs it once per key range it leases: ``JobContext/range`` is that range, and the job
    /// hands each finished batch to ``JobContext/batchDone(_:through:failures:)``.
    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    /// How the job splits between runners when its file says `shards: N` (N at least 2); nil when it runs whole.
    func sharding(of configuration: Configuration) -> JobSharding?
    /// Finishes a sharded run once every range is done, in the runner that started it.
    ///
    /// `report` holds the declared counts summed and the ranges' key lists joined; `summed` has every count the
    /// ranges recorded, undeclared ones included. It sets the status the counts call for, as ``run(_:in:report:)``
    /// does for a run whole (`check` fails on a difference), and does what must see the whole job at once (`mirror`'s
    /// deletions, which `maxDeletes` judges whole, from the keys its ranges set aside). Most types need nothing.
    func finishSharded(
        _ configuration: Configuration, in context: JobContext, summed: [String: Int], report: inout JobReport
    ) async throws(CloudSyncError)
    /// Readies the job's state for a new sharded run before its ranges are recorded (not for a stopped run taken up
    /// again, whose ranges carry on): `sync` forgets deletions an earlier run left. Most types need nothing.
    func prepareSharded(_ configuration: Configuration, in context: JobContext) throws(CloudSyncError)
}

/// How a job's work splits into key ranges that runners on several machines share (``JobType/sharding(of:)``).
public struct JobSharding: Sendable, Equatable {
    /// How many ranges.
    public var shards: Int
    /// The provider whose listing the ranges split, or empty for the store's first provider.
    ///
    /// Each range's run lists only its part of it.
    public var source: String

    /// `shards` ranges of `source`'s keys.
    public init(shards: Int, source: String) {
        self.shards = shards
        self.source = source
    }
}

/// `shards`, as every job type that can split between runners declares it.
package let shardsField = JobField(
    "shards", .count(1...1024), defaultValue: "1",
    summary: "key ranges the job splits into, leased by every runner of the pipeline (`cloudsync run --join`); "
        + "needs `state: { postgresql: … }`")

extension JobType {
    /// Most jobs cannot do their work without the providers they name.
    public var checksAvailability: Bool { true }

    /// Most jobs run whole.
    public func sharding(of configuration: Configuration) -> JobSharding? { nil }

    /// Most jobs promise as much with any provider.
    public func warnings(_ configuration: Configuration, capabilities: (String) -> ProviderCapabilities?) -> [String] {
        []
    }

    /// Most jobs need nothing before their ranges are recorded.
    public func prepareSharded(_ configuration: Configuration, in context: JobContext) throws(CloudSyncError) {}

    /// Most jobs need nothing once their ranges are done.
    public func finishSharded(
        _ configuration: Configuration, in context: JobContext, summed: [String: Int], report: inout JobReport
    ) async throws(CloudSyncError) {}
}

/// How `plan` shows paths: relative to the pipeline file when inside its directory, references as written.
public struct PlanPaths: Sendable {
    let directory: String

    /// Paths shown relative to `directory`, the pipeline file's.
    public init(directory: String) { self.directory = directory }

    /// `path` as the plan shows it.
    public func display(_ path: Interpolated) -> String {
        if path.isInterpolated { return path.display }
        return path.value.hasPrefix(directory + "/") ? String(path.value.dropFirst(directory.count + 1)) : path.value
    }
}
