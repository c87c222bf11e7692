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
        let lock = RepositoryLock(
            repository: self, name: Self.prefix + "lock." + Self.randomID(), exclusive: exclusive, host: host,
            time: store.clock.nowMilliseconds())
        _ = try await writeObjects([(lock.name, lock.plaintext)])
        let now = store.clock.nowMilliseconds()
        var stale: [String] = []
        for held in try await heldLocks(host: host, now: now) where held.name != lock.name {
            guard !held.isStale else {
                stale.append(held.name)
                continue
            }
            guard exclusive || held.exclusive else { continue }
            try? await lock.release()
            throw CloudSyncError(
                .locked,
                "the backup repository in \(provider) is locked by \(held.holder), "
                    + "\(held.exclusive ? "exclusively (a prune)" : "for a backup, restore or verify"), refreshed "
                    + "\(held.minutesOld) min ago; run again when it ends (a lock not refreshed for "
                    + "\(RepositoryLock.staleAfter / 60_000) min, or left on this machine by a process that is gone, is "
                    + "taken as stale; `cloudsync unlock` removes stale ones)",
                provider: provider, key: held.name)
        }
        if exclusive { try await removeObjects(stale) }
        return lock
    }

    /// Every lock object of the repository that opens (locks that do not, another key's or damaged, are ignored),
    /// judged at `now` from `host`.
    func heldLocks(host: String, now: Int64) async throws(CloudSyncError) -> [HeldLock] {
        try await listObjects()
        let names = objectNames("lock")
        var held: [HeldLock] = []
        for (name, stored) in zip(names, try await store.read(names, from: provider)) {
            guard let stored, let plaintext = try? keys.open(stored, name: name, repository: provider),
                let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any]
            else { continue }
            held.append(HeldLock(name: name, object: object, host: host, now: now))
        }
        return held
    }

    /// Runs `body` holding a lock    /// Runs `body` holding a lock (see ``lock(exclusive:host:)``), released when it ends, thrown or not.
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

/// A lock object as another process reads it.
public struct HeldLock: Sendable, Equatable {
    /// Its store key.
    public var name: String
    /// `host (pid n)`.
    public var holder: String
    public var exclusive: Bool
    /// Minutes since its holder last wrote it, by the reader's clock.
    public var minutesOld: Int64
    /// Whether it no longer counts: older than ``RepositoryLock/staleAfter``, or written on the reader's machine by a
    /// process that is gone.
    public var isStale: Bool

    init(name: String, object: [String: Any], host: String, now: Int64) {
        let time = (object["time"] as? NSNumber)?.int64Value ?? 0
        self.name = name
        holder = "\(object["host"] as? String ?? "?") (pid \(object["pid"] as? Int ?? 0))"
        exclusive = object["exclusive"] as? Bool ?? true
        minutesOld = max(0, (now - time) / 60_000)
        isStale = now - time >= RepositoryLock.staleAfter || Self.holderIsGone(object, host: host)
    }

    /// Whether the lock `object` was written on `host` (this machine) by a process that no longer runs: stale at once,
    /// whatever its age (a process id reused since counts as running, and the lock then ages as any other).
    static func holderIsGone(_ object: [String: Any], host: String) -> Bool {
        guard object["host"] as? String == host, let pid = object["pid"] as? Int, pid > 0,
            pid != Int(ProcessInfo.processInfo.processIdentifier)
        else { return false }
        return kill(pid_t(pid), 0) != 0 && errno == ESRCH
    }
}

extension BackupRepository {
    /// Removes the repository's stale locks (see ``HeldLock/isStale``), or every lock with `removeAll`.
    ///
    /// Answers what it removed and what it left. Removing a live process's lock lets a prune run beside it;
    /// `removeAll` is for a holder known to be gone on another machine.
    public func unlock(removeAll: Bool = false, host: String = ProcessInfo.processInfo.hostName)
        async throws(CloudSyncError) -> (removed: [HeldLock], kept: [HeldLock])
    {
        let held = try await heldLocks(host: host, now: store.clock.nowMilliseconds())
        let removed = held.filter { removeAll || $0.isStale }
        try await removeObjects(removed.map(\.name))
        return (removed, held.filter { !(removeAll || $0.isStale) })
    }
}
