import CloudSync

/// A file's migrations beside what the state records of them: which are applied, pending, stopped partway or edited
/// since, as `cloudsync migrations` shows them and a run checks them.
public struct MigrationLedger: Sendable {
    /// Where one migration stands.
    public enum Standing: String, Sendable, Codable {
        /// Applied whole, with the checksum the file gives now.
        case applied
        /// Not begun.
        case pending
        /// Begun and stopped partway (a step failed or the run was interrupted); the next run resumes it, with the
        /// steps it did not reach as the file gives them now.
        case failed
        /// Recorded with another checksum than the file now gives: applied, or stopped partway, and a step it
        /// applied or began was edited since.
        case changed
    }

    /// One migration's line.
    public struct Line: Sendable, Codable, Equatable {
        public var id: String
        public var description: String?
        public var standing: Standing
        /// The checksum the file gives now.
        public var checksum: String
        /// The checksum the state recorded, when it differs from ``checksum``.
        public var recordedChecksum: String?
        public var steps: Int
        public var stepsApplied: Int
        public var appliedBy: String?
        public var appliedAt: String?
        public var runId: String?
        public var error: String?
    }

    /// The file's migrations, in order.
    public let migrations: [MigrationSpec]
    /// The state's record of each, in the same order; nil for one never begun.
    public let records: [MigrationRecord?]

    /// The ledger of `migrations` with their `records`.
    public init(migrations: [MigrationSpec], records: [MigrationRecord?]) {
        self.migrations = migrations
        self.records = records
    }

    /// The ledger of `migrations` as `state` records them.
    public init(migrations: [MigrationSpec], state: any ProviderStateStore) throws(CloudSyncError) {
        self.migrations = migrations
        records = try migrations.map { (migration) throws(CloudSyncError) in
            try MigrationRecord.load(migration.id, from: state)
        }
    }

    /// Each migration's line.
    public var lines: [Line] {
        zip(migrations, records).map { migration, record in
            var line = Line(
                id: migration.id, description: migration.description, standing: .pending,
                checksum: migration.checksum, steps: migration.steps.count, stepsApplied: record?.stepsApplied ?? 0,
                appliedBy: record?.appliedBy, appliedAt: record?.appliedAt, runId: record?.runId, error: record?.error)
            guard let record else { return line }
            if !migration.continues(record) {
                line.standing = .changed
                line.recordedChecksum = record.checksum
            } else {
                line.standing = record.status == .applied ? .applied : .failed
            }
            return line
        }
    }

    /// Why a run must not apply the file's migrations, with the id of the migration concerned: one recorded with
    /// another checksum (edited since), or one never begun listed before one that was (they apply in file order);
    /// nil when it may.
    public var refusal: (id: String, error: CloudSyncError)? {
        let lines = lines
        if let index = lines.firstIndex(where: { $0.standing == .changed }) {
            let changed = lines[index]
            let applied = records[index]?.status == .applied
            let what =
                applied
                ? "was applied with checksum \(changed.recordedChecksum ?? "")"
                : "stopped partway with checksum \(changed.recordedChecksum ?? "")"
            let remedy =
                applied
                ? "Put them back as they were and write the change as a new migration; or, once you have checked "
                    + "that the store is as the edited steps would leave it, record the new checksum with "
                    + "`cloudsync migrations repair FILE \(changed.id)`"
                : "Put the steps it applied or began back as they were (only steps it did not reach may change), "
                    + "and a run finishes it"
            return (
                changed.id,
                CloudSyncError(
                    .config,
                    "migration \(changed.id) \(what) (run \(changed.runId ?? "?"), by \(changed.appliedBy ?? "?")), but "
                        + "the file now gives checksum \(changed.checksum): its steps were edited since. " + remedy)
            )
        }
        if let lastBegun = lines.lastIndex(where: { $0.standing != .pending }),
            let skipped = lines[..<lastBegun].first(where: { $0.standing == .pending })
        {
            return (
                skipped.id,
                CloudSyncError(
                    .config,
                    "migration \(skipped.id) was never applied, but \(lines[lastBegun].id), listed after it, was; "
                        + "migrations apply in file order, so move \(skipped.id) after \(lines[lastBegun].id)")
            )
        }
        return nil
    }
}

extension PipelineSpec {
    /// The migration the file declares as `id`; `ERR_CONFIG` listing the ids it declares when there is none.
    public func migration(_ id: String) throws(CloudSyncError) -> MigrationSpec {
        guard let migration = migrations.first(where: { $0.id == id }) else {
            let ids = migrations.map(\.id).joined(separator: ", ")
            throw CloudSyncError(
                .config, "\(file) declares no migration \(id)" + (ids.isEmpty ? "" : "; it declares \(ids)"))
        }
        return migration
    }
}
