import CloudSync
import CloudSyncPipeline
import CloudSyncPostgres
import Foundation

/// One command changing a pipeline's state at a time across machines: a session-level advisory lock on the state's
/// PostgreSQL connection, keyed by schema and pipeline name.
///
/// The server holds it for as long as the session lives, so a runner that dies, is killed or loses its connection
/// releases it at once: there is no stale lock to wait out or take over. Beside it, the holder writes its host, process
/// id and start time in `run_locks` for the refusal's message only; a row whose session no longer holds an advisory
/// lock names nobody.
final class PostgresRunLock: HeldRunLock {
    enum Outcome {
        case acquired(PostgresRunLock)
        /// Another session holds the lock; `holder` words who ("process 4242 on host-b since …") when it has said.
        case heldBy(holder: String?, lock: String)
    }

    private let state: PostgresStateDatabase
    private let released = Protected(false)

    private init(state: PostgresStateDatabase) { self.state = state }

    /// What the lock is called in messages.
    static func name(of state: PostgresStateDatabase) -> String {
        "the run lock of \(state.pipeline) in \(state.location)"
    }

    /// Takes the lock of `state`'s pipeline on its connection without waiting, naming the run that holds it
    /// (`runID`, for runners that join it by name), or says who holds it.
    static func acquire(_ state: PostgresStateDatabase, runID: String? = nil) throws(CloudSyncError) -> Outcome {
        let key = PostgresValue.text("cloudsync.run/\(state.schema)/\(state.pipeline)")
        let host = ProcessInfo.processInfo.hostName
        let pid = Int64(getpid())
        let since = iso8601(SystemClock().nowMilliseconds())
        let holder: String?? = try state.run { db throws(PostgresError) in
            let taken = try db.execute("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", [key])
            if taken.rows.first?[0].boolean == true {
                try db.execute(
                    "INSERT INTO run_locks (pipeline, host, pid, since, backend, run_id) "
                        + "VALUES ($1, $2, $3, $4, pg_backend_pid(), $5) ON CONFLICT (pipeline) DO UPDATE SET "
                        + "host = EXCLUDED.host, pid = EXCLUDED.pid, since = EXCLUDED.since, backend = EXCLUDED.backend, "
                        + "run_id = EXCLUDED.run_id",
                    [
                        .text(state.pipeline), .text(host), .integer(pid), .text(since),
                        runID.map(PostgresValue.text) ?? .null,
                    ])
                return .none
            }
            let row = try db.execute(
                "SELECT host, pid, since FROM run_locks r WHERE pipeline = $1 AND EXISTS "
                    + "(SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.pid = r.backend)",
                [.text(state.pipeline)]
            ).rows.first
            return .some(row.map { "process \($0[1].integer ?? 0) on \($0[0].text ?? "?") since \($0[2].text ?? "?")" })
        }
        guard let holder else { return .acquired(PostgresRunLock(state: state)) }
        return .heldBy(holder: holder, lock: name(of: state))
    }

    /// Gives the lock back on the still open session; closing the session gives it back too.
    func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        guard first else { return }
        let key = PostgresValue.text("cloudsync.run/\(state.schema)/\(state.pipeline)")
        _ = try? state.run { db throws(PostgresError) in
            try db.execute(
                "DELETE FROM run_locks WHERE pipeline = $1 AND backend = pg_backend_pid()", [.text(state.pipeline)])
            try db.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [key])
        }
    }
}
