import Foundation

/// Whether the stress suites run, and at which size.
///
/// They run only on their own, after the main suite (their hundreds of processes would starve it). `make test`, and
/// so CI, sets `CLOUDSYNC_STRESS=1`: each suite runs at a size that keeps CI within its time and still sends a few
/// hundred processes through every race it covers. `make stress` sets `CLOUDSYNC_STRESS=full`: the sizes the suites
/// were designed at, for hunting a rare interleaving after changing the code a suite covers, or before a release.
public enum StressSize {
    /// `CLOUDSYNC_STRESS` as the environment has it.
    private static let setting = ProcessInfo.processInfo.environment["CLOUDSYNC_STRESS"]

    /// Whether `CLOUDSYNC_STRESS` asks for the stress suites (`1` or `full`).
    public static let isEnabled = setting == "1" || setting == "full"

    /// Whether `CLOUDSYNC_STRESS=full` asks for their full sizes.
    public static let isFull = setting == "full"

    /// `full` under `CLOUDSYNC_STRESS=full`, `ci` otherwise.
    public static func pick(ci: Int, full: Int) -> Int { isFull ? full : ci }
}
