import CloudSync
import Foundation

/// A lock on a backup repository, held as an object of its own (`lock.<random id>`, sealed like every object).
///
/// Backups, restores and verifies take a shared lock; prune takes an exclusive one. A process writes its lock
/// object first and then lists the others, so of two processes racing for conflicting locks at least one sees the
/// other and backs off (both may: each run again later). A lock not refreshed for ``staleAfter`` — its process died
/// — no longer counts; holders refresh theirs every ``refreshEvery`` while they work.
public final class RepositoryLock {
    /// A lock older than this (15 minutes) is taken to belong to a process that died.
    public static let staleAfter: Int64 = 15 * 60_000
    /// Holders rewrite their lock this often (5 minutes) while they work.
    public static let refreshEvery: Int64 = 5 * 60_000

    let repository: BackupRepository
    /// The lock object's name.
    public let name: String
    let exclusive: Bool
    let host: String
    private var written: Int64

    init(repository: BackupRepository, name: String, exclusive: Bool, host: String, time: Int64) {
        self.repository = repository
        self.name = name
        self.exclusive = exclusive
        self.host = host
        self.written = time
    }

    fileprivate var plaintext: [UInt8] {
        BackupRepository.json([
            "time": written, "host": host, "pid": Int(ProcessInfo.processInfo.processIdentifier),
            "exclusive": exclusive,
        ])
    }

    /// Rewrites the lock with the store clock's time when it was last written more than ``refreshEvery`` before;
    /// cheap to call often.
    public func refresh() async throws(CloudSyncError) {
        let now = repository.store.clock.nowMilliseconds()
        guard now - written >= Self.refreshEvery else { return }
        written = now
        _ = try await repository.writeObjects([(name, plaintext)])
    }

    /// Removes the lock.
    public func release() async throws(CloudSyncError) {
        try await repository.removeObjects([name])
    }
}

extension BackupRepository {
    /// Takes a lock on the repository at the store clock's time: shared (`exclusive` false: backups, restores,
    /// checks, which may run beside each other) or exclusive (prune, which runs alone).
    ///
    /// `ERR_LOCKED` naming the holder when a fresh lock conflicts; locks that do not open (another key's, damaged)
    /// are ignored, and stale ones are removed by an exclusive locker.
    public func lock(exclusive: Bool, host: String = ProcessInfo.processInfo.hostName)
        async throws(CloudSyncError) -> RepositoryLock
    {
        let now = store.clock.nowMilliseconds()
        let lock = RepositoryLock(
            repository: self, name: Self.prefix + "lock." + Self.randomID(), exclusive: exclusive, host: host,
            time: now)
        _ = try await writeObjects([(lock.name, lock.plaintext)])
        try await listObjects()
        let others = objectNames("lock").filter { $0 != lock.name }
        var stale: [String] = []
        for (name, stored) in zip(others, try await store.read(others, from: provider)) {
            guard let stored, let plaintext = try? keys.open(stored, name: name, repository: provider),
                let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any]
            else { continue }
            let time = (object["time"] as? NSNumber)?.int64Value ?? 0
            guard now - time < RepositoryLock.staleAfter, !Self.holderIsGone(object, host: host) else {
                stale.append(name)
                continue
            }
            let theirs = object["exclusive"] as? Bool ?? true
            guard exclusive || theirs else { continue }
            try? await lock.release()
            let holder = "\(object["host"] as? String ?? "?") (pid \(object["pid"] as? Int ?? 0))"
            let minutes = max(0, (now - time) / 60_000)
            throw CloudSyncError(
                .locked,
                "the backup repository in \(provider) is locked by \(holder), "
                    + "\(theirs ? "exclusively (a prune)" : "for a backup, restore or verify"), refreshed \(minutes) "
                    + "min ago; run again when it ends (a lock not refreshed for "
                    + "\(RepositoryLock.staleAfter / 60_000) min is taken as left by a process that died)",
                provider: provider, key: name)
        }
        if exclusive { try await removeObjects(stale) }
        return lock
    }

    /// Whether the lock `object` was written on `host` (this machine) by a process that no longer runs: stale at once,
    /// whatever its age (a process id reused since counts as running, and the lock then ages as any other).
    static func holderIsGone(_ object: [String: Any], host: String) -> Bool {
        guard object["host"] as? String == host, let pid = object["pid"] as? Int, pid > 0,
            pid != Int(ProcessInfo.processInfo.processIdentifier)
        else { return false }
        return kill(pid_t(pid), 0) != 0 && errno == ESRCH
    }

    /// Runs `body` holding a lock (see ``lock(exclusive:host:)``), released when it ends, thrown or not.
    public func withLock<T>(exclusive: Bool, _ body: (RepositoryLock) async throws(CloudSyncError) -> T)
        async throws(CloudSyncError) -> T
    {
        let lock = try await lock(exclusive: exclusive)
        let result: T
        do {
            result = try await body(lock)
        } catch {
            try? await lock.release()
            throw error
        }
        try await lock.release()
        return result
    }
}
