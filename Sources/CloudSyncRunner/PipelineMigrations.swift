import CloudSync
import CloudSyncPipeline

/// A pipeline's migrations beside its state's records of them (`cloudsync migrations`).
public enum PipelineMigrations {
    /// Where each of the file's migrations stands, read without the run lock; all pending when the pipeline never
    /// ran.
    public static func ledger(of compiled: CompiledPipeline, stores: StateStoreRegistry = BuiltInStateStores.registry)
        throws(CloudSyncError) -> MigrationLedger
    {
        let migrations = compiled.spec.migrations
        return try stores.withState(compiled, access: .read) { state throws(CloudSyncError) in
            guard let state else {
                return MigrationLedger(migrations: migrations, records: migrations.map { _ in nil })
            }
            return try MigrationLedger(migrations: migrations, state: state)
        }
    }

    /// Repairs migration `id`'s record after someone reviewed why it is refused or stopped, and says what it did.
    ///
    /// - An applied migration whose steps were edited since: records the checksum the file now gives (keeping the
    ///   old one), once someone checked the store is as the edited steps would leave it.
    /// - A migration stopped in a step whose plan a run resumed and still could not finish (keys changed since the
    ///   plan, which no later run will write): records that step applied, leaving those keys as they are, so the next
    ///   run goes on with the step after it.
    ///
    /// Takes the run lock, so no run applies migrations meanwhile. Refused (`ERR_CONFIG`) for an id the file does
    /// not declare, one never begun, and one with nothing to repair.
    public static func repair(
        _ id: String, of compiled: CompiledPipeline, stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> String {
        let migration = try compiled.spec.migration(id)
        return try stores.withState(compiled, access: .writeExisting) { state throws(CloudSyncError) in
            guard let state, var record = try MigrationRecord.load(id, from: state) else {
                throw CloudSyncError(.config, "migration \(id) was never applied, so there is nothing to repair")
            }
            let what: String
            switch record.status {
            case .applied:
                guard record.checksum != migration.checksum else {
                    throw CloudSyncError(
                        .config, "migration \(id) is applied with the checksum the file gives; nothing to repair")
                }
                what = "recorded checksum \(migration.checksum) in place of \(record.checksum)"
                record.repairedFrom = record.checksum
                record.checksum = migration.checksum
                record.stepChecksums = migration.stepChecksums
            case .failed:
                guard migration.continues(record) else {
                    throw CloudSyncError(
                        .config,
                        "migration \(id) stopped partway and a step it began was edited since; put the steps it "
                            + "applied or began back as they were, and a run finishes it")
                }
                guard let step = record.plannedStep else {
                    throw CloudSyncError(
                        .config,
                        "migration \(id) stopped before its next step was planned, so nothing of that step was "
                            + "written; fix what its report named and run again")
                }
                what =
                    "recorded step \(step) applied, leaving the keys changed since its plan as they are; the next run "
                    + "goes on with step \(step + 1)"
                record.stepsApplied = step
                record.plannedStep = nil
                record.error = "step \(step) accepted by `migrations repair`"
            }
            try record.save(id, to: state)
            return "migration \(id): " + what
        }
    }
}
