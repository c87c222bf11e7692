import CloudSync
import CloudSyncPostgres

/// Keys a sharded job's ranges set aside for the step that runs once every range is done (a mirror's deletions,
/// which its `maxDeletes` must judge whole), kept in `shard_keys` by job and list, each once.
extension PostgresStateDatabase {
    /// Adds `keys` to `list` of `job`; a key already there (a range resumed after its runner stopped) stays once.
    func setAside(_ keys: [String], in list: String, of job: String) throws(CloudSyncError) {
        guard !keys.isEmpty else { return }
        try run { db throws(PostgresError) in
            try db.execute(
                "INSERT INTO shard_keys (pipeline, job, list, key) SELECT $1, $2, $3, decode(k, 'hex') "
                    + "FROM unnest($4::text[]) AS r(k) ON CONFLICT DO NOTHING",
                [.text(pipeline), .text(job), .text(list), hexKeys(keys)])
        }
    }

    /// How many keys `list` of `job` holds.
    func setAsideCount(in list: String, of job: String) throws(CloudSyncError) -> Int {
        Int(
            try run { db throws(PostgresError) in
                try db.execute(
                    "SELECT count(*) FROM shard_keys WHERE pipeline = $1 AND job = $2 AND list = $3",
                    [.text(pipeline), .text(job), .text(list)])
            }.rows.first?[0].integer ?? 0)
    }

    /// The next `limit` keys of `list` of `job` after `key`, in bytewise order.
    func setAsideKeys(in list: String, of job: String, after key: String?, limit: Int) throws(CloudSyncError)
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

/// Where a sharded job's range sets keys aside, and where the step after every range finds them; nil in a job run
/// whole (``JobContext/setAside``).
struct SetAsideKeys: Sendable {
    let state: PostgresStateDatabase
    let job: String

    /// Adds `keys` to `list`.
    func add(_ keys: [String], to list: String) throws(CloudSyncError) { try state.setAside(keys, in: list, of: job) }

    /// How many keys `list` holds.
    func count(of list: String) throws(CloudSyncError) -> Int { try state.setAsideCount(in: list, of: job) }

    /// The next `limit` keys of `list` after `key`, in bytewise order.
    func keys(of list: String, after key: String?, limit: Int) throws(CloudSyncError) -> [String] {
        try state.setAsideKeys(in: list, of: job, after: key, limit: limit)
    }
}
