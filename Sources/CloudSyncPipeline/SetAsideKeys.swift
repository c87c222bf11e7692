import CloudSync

/// A state store that keeps the keys a sharded job's ranges set aside for the step that runs once every range is done
/// (a mirror's deletions, which its `maxDeletes` must judge whole), by job and list, each key once.
public protocol SetAsideKeyStore: Sendable {
    /// Adds `keys` to `list` of `job`; a key already there (a range resumed after its runner stopped) stays once.
    func setAside(_ keys: [String], in list: String, of job: String) throws(CloudSyncError)
    /// How many keys `list` of `job` holds.
    func setAsideCount(in list: String, of job: String) throws(CloudSyncError) -> Int
    /// The next `limit` keys of `list` of `job` after `key`, in bytewise order.
    func setAsideKeys(in list: String, of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [String]
}

/// Where a sharded job's range sets keys aside, and where the step after every range finds them; nil in a job run
/// whole (``JobContext/setAside``).
package struct SetAsideKeys: Sendable {
    let store: any SetAsideKeyStore
    let job: String

    package init(store: any SetAsideKeyStore, job: String) {
        self.store = store
        self.job = job
    }

    /// Adds `keys` to `list`.
    package func add(_ keys: [String], to list: String) throws(CloudSyncError) {
        try store.setAside(keys, in: list, of: job)
    }

    /// How many keys `list` holds.
    package func count(of list: String) throws(CloudSyncError) -> Int { try store.setAsideCount(in: list, of: job) }

    /// The next `limit` keys of `list` after `key`, in bytewise order.
    package func keys(of list: String, after key: String?, limit: Int) throws(CloudSyncError) -> [String] {
        try store.setAsideKeys(in: list, of: job, after: key, limit: limit)
    }
}
