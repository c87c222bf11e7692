import CloudSync
import CloudSyncPipeline
import Foundation

/// The slots of a schedule that several `cloudsync serve` hosts share through the pipeline's shared state.
public enum SharedSlots {
    /// Claims `slot` of the pipeline for `host` when its state is shared (true when this host got it); a pipeline
    /// whose state is its own shares slots with no one, and always gets them.
    public static func claim(
        _ slot: Date, of compiled: CompiledPipeline, host: String,
        stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(CloudSyncError) -> Bool {
        guard compiled.spec.sharedState != nil else { return true }
        return try stores.withState(compiled, access: .join) { (state) throws(CloudSyncError) in
            guard let shared = state?.shared else { return true }
            return try shared.claimSlot(Int64((slot.timeIntervalSince1970 * 1000).rounded()), host: host)
        }
    }
}
