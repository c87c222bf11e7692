import CloudSync
import CloudSyncPipeline
import CloudSyncPipelineState
import Foundation

/// Keeps what `cloudsync login` yields in a pipeline's state database, where the provider finds it in its
/// `ProviderState` on every later run, and forgets it for `cloudsync logout`.
///
/// Each change takes the pipeline's lock for as long as it writes (never while a person signs in), so it never
/// lands in the middle of a run; the values are encrypted with the pipeline's state codec, as every provider value.
public enum PipelineCredentials {
    /// Whether a process (a run, an outbox flush) holds the pipeline's lock: nil when none does, else its id
    /// (nil inside when it has not written it yet; `RunRefusal.holder(_:)` words both).
    ///
    /// A holder that wrote no id is watched for up to a second, off the concurrency pool, in case it is only a child
    /// process that shares a just-released lock until it execs.
    public static func lockHolder(of compiled: CompiledPipeline) async -> Int32?? {
        let directory = compiled.spec.state
        let outcome = try? await offThePool { () throws(RunRefusal) in RunLock.holder(in: directory) }
        guard case .heldBy(let pid)? = outcome else { return nil }
        return .some(pid)
    }

    /// Keeps `credentials` for `provider` in the pipeline's state (created when missing: 0600 in a 0700 state
    /// directory, or the PostgreSQL schema migrated), replacing what was kept; returns where the state is.
    ///
    /// Throws `RunRefusal.locked(pid:lockFile:)` (or `RunRefusal.lockedElsewhere(holder:lock:)`) while another
    /// command holds the pipeline, and `RunRefusal.cannotStart(_:)` when the state cannot be written.
    @discardableResult
    public static func store(
        _ credentials: [StoredCredential: String], for provider: String, in compiled: CompiledPipeline,
        stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(RunRefusal) -> String {
        try changing(compiled, access: .write(runID: nil), stores) { database throws(CloudSyncError) in
            let state = ProviderState(provider: provider, store: database)
            for (credential, value) in credentials.sorted(by: { $0.key.name < $1.key.name }) {
                try state.replace(credential, with: value)
            }
        }
        return stores.store(for: compiled.spec)?.location(of: compiled.spec) ?? compiled.spec.state
    }

    /// Forgets `credentials` of `provider` and returns those that were kept.
    ///
    /// A pipeline without state has none, and nothing is created for it.
    public static func forget(
        _ credentials: [StoredCredential], for provider: String, in compiled: CompiledPipeline,
        stores: StateStoreRegistry = BuiltInStateStores.registry
    ) throws(RunRefusal) -> [StoredCredential] {
        var forgotten: [StoredCredential] = []
        try changing(compiled, access: .writeExisting, stores) { database throws(CloudSyncError) in
            let state = ProviderState(provider: provider, store: database)
            for credential in credentials where try state.forget(credential) { forgotten.append(credential) }
        }
        return forgotten
    }

    /// `body` over the pipeline's state, opened for `access` with its run lock held; nothing when the access
    /// creates nothing and there is no state.
    private static func changing(
        _ compiled: CompiledPipeline, access: StateAccess, _ stores: StateStoreRegistry,
        _ body: (any PipelineState) throws(CloudSyncError) -> Void
    ) throws(RunRefusal) {
        guard let opened = try stores.open(compiled, access: access) else { return }
        defer { opened.close() }
        do {
            try body(opened.state)
        } catch {
            throw opened.state.shared == nil ? RunRefusal.cannotStart(error) : .stateUnavailable(error)
        }
    }
}
