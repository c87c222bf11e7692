import CloudSync
import Foundation

/// A lock on a backup repository, held as an object of its own (`lock.<random id>`, sealed like every object).
///
/// Backups, restores and verifies take a shared lock; prune takes an exclusive one. A process writes its lock
/// object first and then lists the others, so of two processes racing for conflicting locks at least one sees the
/// other and backs off (both may: each run again later). A lock not refreshed for ``staleAfter`` — its process died
/// — no longer counts; holders refresh theirs every ``refreshEvery`` while they work.
///
/// Age is judged by the repository's own clock where the provider's listing gives modification times (a
/// directory's, S3's `LastModified`): the reader's own lock, just written, tells the repository's time now, and
/// every other lock's listed time is compared with it, so hosts whose clocks disagree judge alike. Elsewhere the
/// time the writer put in the lock is compared with the reader's clock.
///
/// A holder that finds its lock gone (another process took it for a dead one's: it was paused past the window) stops
/// writing: a prune may have deleted what it wrote. ``confirm()`` checks that before a backup writes its index and
/// snapshot.
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

    /// Rewrites the lock with the store clock's time when it was last written more than ``refreshEvery`` before.
    ///
    /// Cheap to call often. `ERR_LOCKED` when the lock is gone: stop writing (see ``confirm()``).
    public func refresh() async throws(CloudSyncError) {
        guard repository.store.clock.nowMilliseconds() - written >= Self.refreshEvery else { return }
        try await rewrite()
    }

    /// Makes sure the lock still holds before its holder commits what it wrote (a backup, its index and snapshot):
    /// `ERR_LOCKED` when the lock is gone or a prune's exclusive lock appeared since.
    ///
    /// The lock is read, rewritten (fresh from now on) and the locks listed again, as taking it did: a prune that
    /// started before the rewrite is seen here, and one that starts after it finds this lock fresh and backs off.
    public func confirm() async throws(CloudSyncError) {
        try await rewrite()
        let held = try await repository.heldLocks(host: host, now: repository.store.clock.nowMilliseconds(), own: name)
        if let prune = held.first(where: { $0.name != name && $0.exclusive && !$0.isStale }) {
            throw CloudSyncError(
                .locked,
                "a prune (\(prune.holder)) took the backup repository in \(repository.provider) while this process held "
                    + "a lock on it; it stopped before writing its index and snapshot: run it again when the prune ends",
                provider: repository.provider, key: prune.name)
        }
    }

    /// Writes the lock again with the store clock's time, after checking it is still there.
    private func rewrite() async throws(CloudSyncError) {
        guard try await repository.store.read([name], from: repository.provider)[0] != nil else {
            throw CloudSyncError(
                .locked,
                "this process's lock on the backup repository in \(repository.provider) was removed by another process "
                    + "(it went \(Self.staleAfter / 60_000) min without a refresh, so it was taken for a dead "
                    + "process's, or `cloudsync unlock --remove-all` removed it); a prune may have deleted what this "
                    + "process wrote, so it stopped without writing more: run it again",
                provider: repository.provider, key: name)
        }
        written = repository.store.clock.nowMilliseconds()
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
        let lock = try await writeLock(exclusive: exclusive, host: host)
        let now = store.clock.nowMilliseconds()
        var stale: [String] = []
        for held in try await heldLocks(host: host, now: now, own: lock.name) where held.name != lock.name {
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

    /// Writes a new lock object, shared or `exclusive`, and answers it.
    private func writeLock(exclusive: Bool, host: String) async throws(CloudSyncError) -> RepositoryLock {
        let lock = RepositoryLock(
            repository: self, name: Self.prefix + "lock." + Self.randomID(), exclusive: exclusive, host: host,
            time: store.clock.nowMilliseconds())
        _ = try await writeObjects([(lock.name, lock.plaintext)])
        return lock
    }

    /// Every lock object of the repository that opens (locks that do not, another key's or damaged, are ignored),
    /// judged from `host`: by the repository's clock where the listing gives the times of the others and of `own`
    /// (a lock this process has just written), else by the writers' times against `now`.
    func heldLocks(host: String, now: Int64, own: String? = nil) async throws(CloudSyncError) -> [HeldLock] {
        try await listObjects()
        let names = objectNames("lock")
        let repositoryNow = own.flatMap { objectTimes[$0] }
        var held: [HeldLock] = []
        for (name, stored) in zip(names, try await store.read(names, from: provider)) {
            guard let stored, let plaintext = try? keys.open(stored, name: name, repository: provider),
                let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any]
            else { continue }
            let age: HeldLock.Age
            if let repositoryNow, let listed = objectTimes[name] {
                age = .byRepository(repositoryNow - listed)
            } else {
                age = .byWriter(now - ((object["time"] as? NSNumber)?.int64Value ?? 0))
            }
            held.append(HeldLock(name: name, object: object, host: host, age: age))
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
    /// Minutes since its holder last wrote it.
    public var minutesOld: Int64
    /// Whether its age is by the repository's own clock (the provider's modification times) rather than the
    /// writer's clock against the reader's.
    public var agedByRepositoryClock: Bool
    /// Whether it no longer counts: older than ``RepositoryLock/staleAfter``, or written on the reader's machine by a
    /// process that is gone.
    public var isStale: Bool

    /// How long ago a lock was last written, in milliseconds, and by which clocks.
    enum Age {
        /// The provider's time of the reader's own new lock less the provider's time of this one.
        case byRepository(Int64)
        /// The reader's clock less the time the writer put in the lock.
        case byWriter(Int64)
    }

    init(name: String, object: [String: Any], host: String, age: Age) {
        let milliseconds: Int64
        switch age {
        case .byRepository(let value): (milliseconds, agedByRepositoryClock) = (value, true)
        case .byWriter(let value): (milliseconds, agedByRepositoryClock) = (value, false)
        }
        self.name = name
        holder = "\(object["host"] as? String ?? "?") (pid \(object["pid"] as? Int ?? 0))"
        exclusive = object["exclusive"] as? Bool ?? true
        minutesOld = max(0, milliseconds / 60_000)
        isStale = milliseconds >= RepositoryLock.staleAfter || Self.holderIsGone(object, host: host)
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
        // A lock of its own, removed with the others, tells the repository's time now.
        let probe = try await writeLock(exclusive: false, host: host)
        let held = try await heldLocks(host: host, now: store.clock.nowMilliseconds(), own: probe.name)
            .filter { $0.name != probe.name }
        let removed = held.filter { removeAll || $0.isStale }
        try await removeObjects(removed.map(\.name) + [probe.name])
        return (removed, held.filter { !(removeAll || $0.isStale) })
    }
}
