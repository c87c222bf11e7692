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

    /// Records the checksum the file now gives for applied migration `id`, and answers the one it replaced.
    ///
    /// For a migration whose steps were edited since it was applied, once someone checked the store is as the edited
    /// steps would leave it. Takes the run lock, so no run applies migrations meanwhile.
    ///
    /// Refused (`ERR_CONFIG`) for an id the file does not declare, one whose checksum did not change, and one
    /// stopped partway (a run resumes its plans, made from the steps as they were).
    public static func repair(
        _ id: String, of compiled: CompiledPipeline, stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> String {
        guard let migration = compiled.spec.migrations.first(where: { $0.id == id }) else {
            let ids = compiled.spec.migrations.map(\.id).joined(separator: ", ")
            throw CloudSyncError(
                .config,
                "\(compiled.spec.file) declares no migration \(id)" + (ids.isEmpty ? "" : "; it declares \(ids)"))
        }
        return try stores.withState(compiled, access: .writeExisting) { state throws(CloudSyncError) in
            guard let state, var record = try MigrationRecord.load(id, from: state) else {
                throw CloudSyncError(.config, "migration \(id) was never applied, so there is nothing to repair")
            }
            guard record.checksum != migration.checksum else {
                throw CloudSyncError(
                    .config, "migration \(id) has the checksum it was recorded with; nothing to repair")
            }
            guard record.status == .applied else {
                throw CloudSyncError(
                    .config,
                    "migration \(id) stopped partway with its steps as they were; put them back, let a run finish "
                        + "it, and write the change as a new migration")
            }
            let old = record.checksum
            record.repairedFrom = old
            record.checksum = migration.checksum
            try record.save(id, to: state)
            return old
        }
    }
}
