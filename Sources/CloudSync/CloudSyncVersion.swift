/// The version of this library and of the `cloudsync` runner built from it.
public enum CloudSyncVersion {
    public static let current = "0.1.0"
}
