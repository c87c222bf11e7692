import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import Foundation

extension MigrationRun {
    /// Undoes migration `id` (`cloudsync migrations undo`): the keys its steps' plans touched in its provider get
    /// back the values of the snapshot taken before its first step, and those the snapshot lacks (keys it made) are
    /// removed; then the state forgets it, so it is pending again.
    ///
    /// Refused while a migration after it is applied or begun (undo that one first), and for one applied without a
    /// backup (`before: { backup: … }`). Keys outside its plans are never touched.
    func undo(_ id: String) async -> [RunReport.Job] {
        let migrations = compiled.spec.migrations
        guard let index = migrations.firstIndex(where: { $0.id == id }) else { return [] }
        let migration = migrations[index]
        do throws(CloudSyncError) {
            guard let state = session.stateDatabase else {
                throw CloudSyncError(.config, "migration \(id) was never applied: the pipeline has no state yet")
            }
            let ledger = try MigrationLedger(migrations: migrations, state: state)
            guard let record = ledger.records[index] else {
                throw CloudSyncError(.config, "migration \(id) was never applied, so there is nothing to undo")
            }
            if let later = ledger.records.indices.dropFirst(index + 1).last(where: { ledger.records[$0] != nil }) {
                throw CloudSyncError(
                    .config,
                    "migration \(migrations[later].id), after \(id), is applied or begun; undo it first, since it may "
                        + "have rewritten what \(id) left")
            }
            guard let backup = migration.backup, let snapshot = record.backupSnapshot else {
                throw CloudSyncError(
                    .config,
                    "migration \(id) was applied without a backup before it (`before: { backup: … }`), so nothing "
                        + "holds the values it replaced; restore them from a backup of your own")
            }
            var executor = executor(nil)
            executor.onlyKeys = try await touchedKeys(of: migration, record: record)
            let entry = finished(
                await executor.run(try backup.undo(snapshot: snapshot, on: migration.on, name: "\(id) undo")))
            guard entry.status == .ok else { return [entry] }
            try state.setValue(nil, provider: MigrationRecord.provider, name: id)
            try? FileManager.default.removeItem(atPath: planDirectory(of: migration))
            return [entry]
        } catch {
            return [refused(migration, error)]
        }
    }

    /// The keys of the migration's provider its steps' plans wrote or removed: every planned name a step wrote
    /// (copied, replaced, or found already there), and for a step within the provider the keys it renamed away.
    private func touchedKeys(of migration: MigrationSpec, record: MigrationRecord) async throws(CloudSyncError)
        -> Set<StoreKey>
    {
        var touched = Set<StoreKey>()
        let begun = MigrationSpec.begunSteps(of: record)
        for (index, step) in migration.steps.prefix(begun).enumerated() {
            let path = planDirectory(of: migration) + "/step-\(index + 1).plan"
            let reader: SavedPlanFile.Reader
            do throws(CloudSyncError) {
                reader = try SavedPlanFile.Reader(path: path)
            } catch {
                throw CloudSyncError(
                    .config,
                    "the plan of \(step.name) cannot be read (\(error.message)), so which keys it touched is not "
                        + "known; nothing was undone")
            }
            let inPlace = step.job.fields.inPlace
            try await reader.forEachBatch(of: 1_000) { batch throws(CloudSyncError) in
                for plan in batch where [.copy, .overwrite, .unchanged].contains(plan.action) {
                    touched.insert(StoreKey(plan.target))
                    if inPlace { touched.insert(StoreKey(plan.key)) }
                }
            }
        }
        return touched
    }
}
