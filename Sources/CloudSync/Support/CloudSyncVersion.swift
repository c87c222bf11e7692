/// The version of this library and of the `cloudsync` runner built from it.
public enum CloudSyncVersion {
    /// The semantic version; `cloudsync --version` prints it and reports record it.
    public static let current = "0.1.0"
}
