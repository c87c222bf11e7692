import CloudSync
import Foundation

/// A pipeline's run history as its state keeps it, read without taking the run lock (`history`, `serve`).
public enum PipelineHistory {
    /// The last `limit` runs, newest first; none when the pipeline has not run (its state not made yet).
    ///
    /// Fails with `ERR_OFFLINE` or `ERR_CONFIG` when the shared state's server cannot be used, or the state
    /// database's error when it cannot be read.
    public static func runs(of compiled: CompiledPipeline, limit: Int) throws(CloudSyncError) -> [StateDatabase.Run] {
        if let shared = compiled.spec.sharedState {
            let state = try PostgresStateDatabase(shared, pipeline: compiled.spec.name, readOnly: true)
            defer { state.close() }
            return state.isSetUp ? try state.runs(limit: limit) : []
        }
        let path = compiled.spec.state + "/state.db"
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let database = try StateDatabase(path: path, readOnly: true)
        defer { database.close() }
        return try database.runs(limit: limit)
    }
}
