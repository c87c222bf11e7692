import CloudSyncPipeline
import CloudSyncRunner

/// The `cloudsync` command's exit statuses.
///
/// Documented in README.md ("Exit codes"); scripts depend on them, so never renumber.
package enum ExitCode: Int32, Sendable {
    /// Everything asked for was done.
    case success = 0
    /// A job finished with failed keys, or a quota warning under `failOnWarning`.
    case failure = 1
    /// A job could not run at all.
    case jobError = 2
    /// Every job succeeded but writes wait in the outbox (a provider could not take them yet).
    case queued = 3
    /// The command line or a pipeline file was wrong; nothing was done.
    case usage = 64
    /// `serve` could not listen on its address (in use, or not this machine's) (EX_UNAVAILABLE).
    case unavailable = 69
    /// `keygen` or `init` could not create its output file: it exists (neither ever overwrites a file) or its
    /// directory does not (EX_CANTCREAT).
    case cannotCreate = 73
    /// Another run of the same pipeline holds its lock.
    case locked = 75
    /// SIGINT or SIGTERM stopped the run.
    case interrupted = 130
}

extension ExitCode {
    /// The exit status for a run that ended `status`.
    init(_ status: RunStatus) {
        switch status {
        case .ok: self = .success
        case .failed: self = .failure
        case .error: self = .jobError
        case .queued: self = .queued
        case .interrupted: self = .interrupted
        }
    }
}
