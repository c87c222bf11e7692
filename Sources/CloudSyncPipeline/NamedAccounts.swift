/// Where named accounts (`cloudsync login --account NAME`) live.
///
/// A named account is a sign-in kept for a person rather than for one pipeline, in an accounts file that every
/// pipeline whose provider says `account: NAME` reads from. The pipeline language only needs to know where that file
/// lives; the file itself is `AccountStore`'s, in CloudSyncPipelineState.
public enum NamedAccounts {
    /// Where the accounts file lives for this environment: `CLOUDSYNC_ACCOUNTS_DIR`, else
    /// `$XDG_STATE_HOME/cloudsync`, else `$HOME/.local/state/cloudsync`; nil when none of them is set.
    public static func directory(environment: [String: String]) -> String? {
        if let directory = environment["CLOUDSYNC_ACCOUNTS_DIR"], !directory.isEmpty { return directory }
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/cloudsync" }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/state/cloudsync" }
        return nil
    }
}
