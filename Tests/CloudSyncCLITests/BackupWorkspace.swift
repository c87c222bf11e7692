import CloudSyncTesting
import Foundation

/// A scratch directory for backups through the built binary: `keys/vault.key` made by `cloudsync keygen`, the
/// `folders` given (under `data/` or beside it), and a pipeline file written from the YAML given.
struct BackupWorkspace {
    let executable: String
    let directory: TemporaryDirectory

    /// Makes the directory, the key, `folders` and the pipeline file `file` holding `pipeline`.
    init(file: String, pipeline: String, folders: [String] = ["data"]) async throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
        for folder in ["keys"] + folders {
            try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true)
        }
        _ = try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/vault.key")])
        try pipeline.write(toFile: directory.file(file), atomically: true, encoding: .utf8)
    }
}
