import CloudSync
import CloudSyncSodium
import CloudSyncYAML
import Foundation

/// One numbered migration of a pipeline file's `migrations:`: steps that rewrite a key set once, in file order, on
/// every environment the file runs in.
///
/// Each step is a job the runner plans whole and then applies (``SavedPlanMode``), with the plan kept in the
/// pipeline's state directory until the step is recorded applied, so a run stopped partway resumes the same plan
/// and never rewrites a key twice.
public struct MigrationSpec: Sendable {
    /// Its id: unique in the file, recorded in the state once applied.
    public var id: String
    /// What it does, for people; not part of its checksum.
    public var description: String?
    /// The provider its `rename` and `transform` steps rewrite.
    public var on: String
    /// Its steps in order: `move` jobs for renames, `migrate` jobs for transforms and copies.
    public var steps: [JobSpec]
    /// The SHA-256 of what its steps do (``canonicalText(on:steps:)``), hexadecimal: a recorded migration whose
    /// checksum changed is refused.
    public var checksum: String
    /// Each step's own SHA-256 (``canonicalText(of:)``), so a migration stopped partway may have the steps it did
    /// not reach edited, and a plan is bound to the step it was made for.
    public var stepChecksums: [String]
    /// Where it is declared in the file.
    public var mark: YAMLMark
    /// The backup of `on` taken before its first step (`before: { backup: … }`); nil when it names none.
    ///
    /// `cloudsync migrations undo` restores from it. Not part of the checksum: it changes nothing the steps do.
    public var backup: MigrationBackup?

    /// A migration; its checksum is computed from `on` and the steps' types and fields.
    public init(
        id: String, description: String?, on: String, steps: [JobSpec], backup: MigrationBackup? = nil,
        mark: YAMLMark
    ) {
        self.id = id
        self.description = description
        self.on = on
        self.steps = steps
        self.backup = backup
        self.mark = mark
        checksum = Self.sha256(Self.canonicalText(on: on, steps: steps))
        stepChecksums = steps.map { Self.sha256(Self.canonicalText(of: $0)) }
    }

    /// What the checksum covers: the provider, and each step's type and fields (sorted by name, as text), so
    /// reformatting the YAML, its comments or the description changes nothing, and any change to what a step does
    /// does.
    public static func canonicalText(on: String, steps: [JobSpec]) -> String {
        steps.reduce("on \(on)\n") { $0 + canonicalText(of: $1) }
    }

    /// One step's part of ``canonicalText(on:steps:)``: its type and its fields.
    public static func canonicalText(of step: JobSpec) -> String {
        let fields = step.job.fields.values.sorted { $0.key < $1.key }
        return fields.reduce("step \(step.type)" + (step.job.fields.inPlace ? " in place" : "") + "\n") {
            $0 + "  \($1.key): \($1.value.planText)\n"
        }
    }

    private static func sha256(_ text: String) -> String { Hex.encode(SHA256.hash(Array(text.utf8))) }

    /// How many steps `record` began (applied, or planned and stopped in), whose text must not change.
    public static func begunSteps(of record: MigrationRecord) -> Int {
        record.stepsApplied + (record.plannedStep == nil ? 0 : 1)
    }

    /// Whether `record` may go on as this migration: its checksum is this one's, or it stopped partway and every
    /// step it began is unchanged (only steps it did not reach were edited).
    public func continues(_ record: MigrationRecord) -> Bool {
        if record.checksum == checksum { return true }
        guard record.status == .failed, let recorded = record.stepChecksums else { return false }
        let begun = Self.begunSteps(of: record)
        return recorded.count >= begun && stepChecksums.count >= begun
            && Array(recorded.prefix(begun)) == Array(stepChecksums.prefix(begun))
    }
}

/// A migration's backup before its first step, and how its undo restores from it.
public struct MigrationBackup: Sendable {
    /// The `backup` job of the migration's provider into the repository, tagged `migration` and the migration's id.
    public var job: JobSpec
    /// The provider keeping the repository, and the codec opening it.
    public var repository: String
    public var codec: String
    /// The `restore` job type, which the undo configures once it knows the snapshot.
    let restoreType: RegisteredJobType

    /// A migration's backup: `job` into the repository in `repository`, opened by `codec`, undone with
    /// `restoreType`.
    public init(job: JobSpec, repository: String, codec: String, restoreType: RegisteredJobType) {
        self.job = job
        self.repository = repository
        self.codec = codec
        self.restoreType = restoreType
    }

    /// The `restore` job that writes `snapshot`'s values back into `on` and removes the keys it lacks.
    ///
    /// It has no deletion limit: an undo removes every key the migration made. ``JobContext/onlyKeys`` narrows it to
    /// the keys the migration touched.
    public func undo(snapshot: String, on: String, name: String) throws(CloudSyncError) -> JobSpec {
        let values = JobFieldValues([
            "from": .text(repository), "to": .text(on), "codec": .text(codec), "snapshot": .text(snapshot),
            "deletes": .boolean(true), "maxDeletes": .deleteLimit(.percent(100)),
        ])
        do {
            return JobSpec(
                type: restoreType.name, name: name, needs: [], job: try restoreType.configuration(from: values),
                mark: job.mark)
        } catch {
            throw CloudSyncError(.config, "the undo's restore cannot be configured: \(error.message)")
        }
    }
}

/// What the pipeline's state holds of a migration once a run began applying it.
///
/// Kept as a provider value of ``provider`` named by the migration's id, so both state stores (SQLite and
/// PostgreSQL) keep it without a table of their own, sealed with the state's codec as every such value is.
public struct MigrationRecord: Codable, Sendable, Equatable {
    /// Whether it is applied whole, or stopped partway.
    public enum Status: String, Codable, Sendable {
        case applied, failed
    }

    public var status: Status
    /// The checksum of the migration that was applied (or begun).
    public var checksum: String
    /// How many of its steps are applied.
    public var stepsApplied: Int
    /// The step (from 1) whose plan is made and not yet recorded applied; its plan file is resumed.
    public var plannedStep: Int?
    /// Who applied it (`user@host`) and in which run.
    public var appliedBy: String
    public var runId: String
    /// When it was begun and when it was applied whole (ISO 8601, UTC).
    public var startedAt: String
    public var appliedAt: String?
    /// For a failed one, what stopped it.
    public var error: String?
    /// When `cloudsync migrations repair` accepted a changed checksum, the checksum it had before.
    public var repairedFrom: String?
    /// The id of the snapshot taken before its first step (`before: { backup: … }`), which its undo restores.
    public var backupSnapshot: String?
    /// Each step's checksum when it was last begun (``MigrationSpec/stepChecksums``).
    public var stepChecksums: [String]?

    /// The pseudo-provider whose values the records are.
    public static let provider = "cloudsync.migrations"

    /// A record of `migration` begun now.
    public init(_ migration: MigrationSpec, appliedBy: String, runId: String, startedAt: String) {
        status = .failed
        checksum = migration.checksum
        stepChecksums = migration.stepChecksums
        stepsApplied = 0
        self.appliedBy = appliedBy
        self.runId = runId
        self.startedAt = startedAt
    }

    /// The record of migration `id` in `state`, if a run began it; `ERR_CONFIG` when it cannot be read.
    public static func load(_ id: String, from state: any ProviderStateStore) throws(CloudSyncError)
        -> MigrationRecord?
    {
        guard let text = try state.value(provider: provider, name: id) else { return nil }
        do {
            return try JSONDecoder().decode(MigrationRecord.self, from: Data(text.utf8))
        } catch {
            throw CloudSyncError(
                .config,
                "the state's record of migration \(id) cannot be read (\(error)); it was written by another "
                    + "version, or damaged")
        }
    }

    /// Keeps this record as migration `id`'s.
    public func save(_ id: String, to state: any ProviderStateStore) throws(CloudSyncError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = (try? encoder.encode(self)) ?? Data()
        try state.setValue(String(decoding: data, as: UTF8.self), provider: Self.provider, name: id)
    }
}
