import Foundation

/// The checkout the tests run in: its root (where `scripts/` and `.build/` are) and the Python environment
/// `scripts/python-env.sh` makes there for the tests' independent peers.
public enum Repository {
    /// The checkout's root, found from this file's place in it.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    /// The Python of `.build/pyenv`.
    public static let python = root + "/.build/pyenv/bin/python3"
}
