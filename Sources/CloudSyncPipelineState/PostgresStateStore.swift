import CloudSync
import CloudSyncPipeline

/// A pipeline's state in a PostgreSQL schema (`state: { postgres: URL }`), which runners on several machines share
/// (``PostgresStateDatabase``): connected and migrated on open (a schema no runner has set up reads as no state),
/// locked with a session-level advisory lock on that connection (`PostgresRunLock`), which names the run for
/// runners looking for one to join.
public struct PostgresStateStore: PipelineStateStore {
    /// The store.
    public init() {}

    /// Every pipeline whose file declares a shared state.
    public func keeps(_ spec: PipelineSpec) -> Bool { spec.sharedState != nil }

    /// The server and schema, never the URL.
    public func location(of spec: PipelineSpec) -> String { spec.sharedState?.description ?? "PostgreSQL" }

    public func open(_ compiled: CompiledPipeline, access: StateAccess) throws(RunRefusal) -> OpenedState? {
        guard let shared = compiled.spec.sharedState else {
            throw RunRefusal.cannotStart(
                CloudSyncError(.config, "pipeline \(compiled.spec.name) declares no PostgreSQL state"))
        }
        let state: PostgresStateDatabase
        do {
            state = try PostgresStateDatabase(
                shared, pipeline: compiled.spec.name, codec: compiled.stateCodec, readOnly: access == .read)
        } catch {
            throw RunRefusal.stateUnavailable(error)
        }
        let runID: String?
        switch access {
        case .join: return OpenedState(state: state, lock: nil)
        case .read:
            guard state.isSetUp else {
                state.close()
                return nil
            }
            return OpenedState(state: state, lock: nil)
        case .writeExisting: runID = nil
        case .write(let id): runID = id
        }
        do {
            switch try PostgresRunLock.acquire(state, runID: runID) {
            case .acquired(let lock): return OpenedState(state: state, lock: lock)
            case .heldBy(let holder, let lock):
                state.close()
                throw RunRefusal.lockedElsewhere(holder: holder, lock: lock)
            }
        } catch let refusal as RunRefusal {
            throw refusal
        } catch {
            state.close()
            throw RunRefusal.stateUnavailable(
                error as? CloudSyncError ?? CloudSyncError(.config, "cannot take the run lock: \(error)"))
        }
    }
}
