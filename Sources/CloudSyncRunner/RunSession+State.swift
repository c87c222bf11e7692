import CloudSync
import CloudSyncPipeline
import Foundation

extension RunSession {
    /// Opens the pipeline's state with the store in `stores` that keeps it, and takes its run lock unless this is a
    /// dry run or a joining runner; off the concurrency pool, since opening may connect to a server and migrate.
    ///
    /// A dry run reads the state as it is (nil when the pipeline never ran); a joining runner works in the state the
    /// starter locked, which only a shared store allows.
    static func openState(
        _ compiled: CompiledPipeline, access: Access, runID: String?, stores: StateStoreRegistry
    ) async throws(RunRefusal) -> OpenedState? {
        let stateAccess: StateAccess =
            switch access {
            case .write: .write(runID: runID)
            case .dryRun: .read
            case .worker: .join
            }
        return try await offThePool { () throws(RunRefusal) in try stores.open(compiled, access: stateAccess) }
    }
}
