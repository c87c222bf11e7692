/// The `cloudsync` command's exit statuses.
///
/// Documented in README.md; scripts depend on them, so never renumber.
public enum ExitCode: Int32, Sendable {
    /// Everything asked for was done.
    case success = 0
    /// The command ran but something it did failed.
    case failure = 1
    /// The command line or a pipeline file was wrong; nothing was done.
    case usage = 64
}
