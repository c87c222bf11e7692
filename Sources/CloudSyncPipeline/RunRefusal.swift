import CloudSync

/// Why a run could not start.
public enum RunRefusal: Error, Sendable {
    /// Another command holds the pipeline's lock; `pid` is its process id, nil when it had not written it yet.
    case locked(pid: Int32?, lockFile: String)
    /// Another runner holds the pipeline's lock in its shared state (PostgreSQL); `holder` names its process, host and
    /// start when it has said, `lock` the lock and the server.
    case lockedElsewhere(holder: String?, lock: String)
    /// The state or a provider could not be opened: the error says why, with its code (`ERR_CONFIG` for a state
    /// directory that cannot be used, the state database's own code for one that cannot be read) and what to do.
    case cannotStart(CloudSyncError)
    /// The shared state's server could not be used: `ERR_OFFLINE` when it does not answer, `ERR_CONFIG` when it
    /// refuses the login, the database or a privilege.
    case stateUnavailable(CloudSyncError)

    /// Names the process holding a lock for messages: "process 4242", or words saying it is still starting.
    public static func holder(_ pid: Int32?) -> String {
        pid.map { "process \($0)" } ?? "a process that has only just taken the lock"
    }
}

extension RunRefusal {
    /// The refusal as an error for callers that report errors rather than refusals (`history`): the error it carries,
    /// or `ERR_CONFIG` naming a lock's holder.
    package var error: CloudSyncError {
        switch self {
        case .stateUnavailable(let error), .cannotStart(let error): error
        case .locked(let pid, let lockFile):
            CloudSyncError(.config, "\(RunRefusal.holder(pid)) holds the pipeline's lock \(lockFile)")
        case .lockedElsewhere(let holder, let lock):
            CloudSyncError(.config, "\(holder ?? "another runner") holds the pipeline's lock \(lock)")
        }
    }
}
