import CloudSync
import CloudSyncPipeline
import CloudSyncSQLite

extension StateDatabase {
    /// `job`'s rows for these keys (those it has).
    public func mirrorRows(of job: String, keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow] {
        let found = try rows(
            of: job, keys: keys,
            "SELECT digest, source_version, destination_version FROM mirror_rows WHERE job = ? AND key = ?"
        ) { select in
            select.string(0).map {
                MirrorRow(digest: $0, sourceVersion: select.string(1), destinationVersion: select.string(2))
            }
        }
        var rows: [StoreKey: MirrorRow] = [:]
        for (key, row) in found { rows[StoreKey(key)] = row }
        return rows
    }

    /// Sets `job`'s rows for these keys in one transaction; a nil row removes the key's.
    ///
    /// A dry run writes none.
    public func updateMirrorRows(of job: String, _ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        guard overlay == nil, !rows.isEmpty else { return }
        try withRoomForACommit { () throws(CloudSyncError) in try updateMirrorRows(of: job, in: rows) }
    }

    private func updateMirrorRows(of job: String, in rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        try run { db in
            try db.transaction {
                let upsert = try db.prepare(
                    "INSERT OR REPLACE INTO mirror_rows (job, key, digest, source_version, destination_version) "
                        + "VALUES (?, ?, ?, ?, ?)")
                let delete = try db.prepare("DELETE FROM mirror_rows WHERE job = ? AND key = ?")
                for (key, row) in rows {
                    if let row {
                        try upsert.bind(
                            job, key, row.digest, row.sourceVersion.map(SQLiteValue.text) ?? .null,
                            row.destinationVersion.map(SQLiteValue.text) ?? .null
                        ).run()
                        upsert.reset()
                    } else {
                        try delete.bind(job, key).run()
                        delete.reset()
                    }
                }
            }
        }
    }
}
