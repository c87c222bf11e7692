import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres

/// Keys a sharded job's ranges set aside for the step that runs once every range is done (a mirror's deletions,
/// which its `maxDeletes` must judge whole), kept in `shard_keys` by job and list, each once.
extension PostgresStateDatabase: SetAsideKeyStore {
    /// Adds `keys` to `list` of `job`; a key already there (a range resumed after its runner stopped) stays once.
    public func setAside(_ keys: [String], in list: String, of job: String) throws(CloudSyncError) {
        guard !keys.isEmpty else { return }
        try run { db throws(PostgresError) in
            try db.execute(
                "INSERT INTO shard_keys (pipeline, job, list, key) SELECT $1, $2, $3, decode(k, 'hex') "
                    + "FROM unnest($4::text[]) AS r(k) ON CONFLICT DO NOTHING",
                [.text(pipeline), .text(job), .text(list), hexKeys(keys)])
        }
    }

    /// How many keys `list` of `job` holds.
    public func setAsideCount(in list: String, of job: String) throws(CloudSyncError) -> Int {
        Int(
            try run { db throws(PostgresError) in
                try db.execute(
                    "SELECT count(*) FROM shard_keys WHERE pipeline = $1 AND job = $2 AND list = $3",
                    [.text(pipeline), .text(job), .text(list)])
            }.rows.first?[0].integer ?? 0)
    }

    /// The next `limit` keys of `list` of `job` after `key`, in bytewise order.
    public func setAsideKeys(in list: String, of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [String]
    {
        try run { db throws(PostgresError) in
            try db.execute(
                "SELECT key FROM shard_keys WHERE pipeline = $1 AND job = $2 AND list = $3 "
                    + "AND key > decode($4, 'hex') ORDER BY key LIMIT $5",
                [.text(pipeline), .text(job), .text(list), .text(hex(key ?? "")), .integer(Int64(limit))])
        }.rows.map { keyText($0[0]) }
    }
}
