import CloudSync
import CloudSyncPipeline
import Foundation

/// A pipeline's run history as its state keeps it, read without taking the run lock (`history`, `serve`).
public enum PipelineHistory {
    /// The last `limit` runs, newest first; none when the pipeline has not run (its state not made yet).
    ///
    /// Fails with `ERR_OFFLINE` or `ERR_CONFIG` when the shared state's server cannot be used, or the state
    /// database's error when it cannot be read.
    public static func runs(
        of compiled: CompiledPipeline, limit: Int, stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> [RunRecord] {
        try stores.withState(compiled, access: .read) { state throws(CloudSyncError) in
            try state?.runs(limit: limit) ?? []
        }
    }

    /// The report of run `id` of the pipeline: kept with its history in shared state, else read from the report file
    /// its history row names; nil when neither has it.
    public static func report(
        of compiled: CompiledPipeline, id: String, stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> Data? {
        let kept = try stores.withState(compiled, access: .read) { state throws(CloudSyncError) in
            try state?.shared?.report(of: id)
        }
        if let kept { return kept }
        // The newest thousand runs are looked through: the report of an older one is its file's to give.
        guard let path = try runs(of: compiled, limit: 1000, stores: stores).first(where: { $0.id == id })?.report,
            let data = FileManager.default.contents(atPath: path)
        else { return nil }
        return data
    }

    /// The reports of the pipeline's last `limit` runs that have one, newest first: kept with the history in shared
    /// state, else the report files the history rows name.
    public static func recentReports(
        of compiled: CompiledPipeline, limit: Int, stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> [Data] {
        try stores.withState(compiled, access: .read) { state throws(CloudSyncError) in
            if let shared = state?.shared { return try shared.recentReports(limit: limit) }
            return try (state?.runs(limit: limit) ?? []).compactMap { run in
                run.report.flatMap { FileManager.default.contents(atPath: $0) }
            }
        }
    }
}
