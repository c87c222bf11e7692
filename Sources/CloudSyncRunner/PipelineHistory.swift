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

    /// The report of run `id` of the pipeline: kept with its history in shared state, else read from the report file
    /// its history row names; nil when neither has it.
    public static func report(of compiled: CompiledPipeline, id: String) throws(CloudSyncError) -> Data? {
        if let shared = compiled.spec.sharedState {
            let state = try PostgresStateDatabase(shared, pipeline: compiled.spec.name, readOnly: true)
            defer { state.close() }
            if let kept = try state.report(of: id) { return kept }
        }
        // The newest thousand runs are looked through: the report of an older one is its file's to give.
        guard let path = try runs(of: compiled, limit: 1000).first(where: { $0.id == id })?.report,
            let data = FileManager.default.contents(atPath: path)
        else { return nil }
        return data
    }

    /// The reports of the pipeline's last `limit` runs that have one, newest first: kept with the history in shared
    /// state, else the report files the history rows name.
    public static func recentReports(of compiled: CompiledPipeline, limit: Int) throws(CloudSyncError) -> [Data] {
        if let shared = compiled.spec.sharedState {
            let state = try PostgresStateDatabase(shared, pipeline: compiled.spec.name, readOnly: true)
            defer { state.close() }
            return try state.recentReports(limit: limit)
        }
        return try runs(of: compiled, limit: limit).compactMap { run in
            run.report.flatMap { FileManager.default.contents(atPath: $0) }
        }
    }
}
