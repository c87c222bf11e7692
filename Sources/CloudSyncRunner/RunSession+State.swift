import CloudSync
import Foundation

extension RunSession {
    /// Opens the pipeline's state where `state:` puts it, and takes its run lock unless this is a dry run.
    ///
    /// A directory (the default): created 0700, locked with `flock` on `run.lock`, `state.db` opened (read-only in a
    /// dry run, and only when it exists). A PostgreSQL schema: connected, migrated (not in a dry run, where a schema
    /// no runner has set up reads as no state), locked with a session-level advisory lock on that connection, which
    /// names `runID` for runners looking for the run to join.
    static func openState(_ compiled: CompiledPipeline, access: Access, runID: String?) async throws(RunRefusal) -> (
        (any PipelineState)?, (any HeldRunLock)?
    ) {
        if let shared = compiled.spec.sharedState {
            return try await offThePool { () throws(RunRefusal) in
                try openSharedState(compiled, shared, access: access, runID: runID)
            }
        }
        let spec = compiled.spec
        guard access != .worker else {
            throw RunRefusal.cannotStart(
                "only a pipeline whose state is in PostgreSQL can be joined; its runners share their work there")
        }
        var lock: RunLock?
        if access == .write {
            do {
                try FileManager.default.createDirectory(
                    atPath: spec.state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                switch try RunLock.acquire(in: spec.state) {
                case .acquired(let acquired): lock = acquired
                case .heldBy(let pid): throw RunRefusal.locked(pid: pid, lockFile: spec.state + "/run.lock")
                }
            } catch let refusal as RunRefusal {
                throw refusal
            } catch {
                let reason = (error as? CloudSyncError)?.message ?? describeFileError(error)
                throw RunRefusal.cannotStart(
                    "cannot use the state directory \(spec.state): \(reason); check that it can be created and written, "
                        + "or point `state:` elsewhere")
            }
        }
        let statePath = spec.state + "/state.db"
        do {
            if access == .write {
                return (try StateDatabase(path: statePath, codec: compiled.stateCodec), lock)
            }
            guard FileManager.default.fileExists(atPath: statePath) else { return (nil, nil) }
            return (try StateDatabase(path: statePath, codec: compiled.stateCodec, readOnly: true), nil)
        } catch {
            lock?.release()
            throw RunRefusal.cannotStart(error.description)
        }
    }

    private static func openSharedState(
        _ compiled: CompiledPipeline, _ shared: SharedStateSpec, access: Access, runID: String?
    ) throws(RunRefusal) -> ((any PipelineState)?, (any HeldRunLock)?) {
        let state: PostgresStateDatabase
        do {
            state = try PostgresStateDatabase(
                shared, pipeline: compiled.spec.name, codec: compiled.stateCodec, readOnly: access == .dryRun)
        } catch {
            throw RunRefusal.stateUnavailable(error)
        }
        guard access != .worker else { return (state, nil) }
        guard access == .write else {
            guard state.isSetUp else {
                state.close()
                return (nil, nil)
            }
            return (state, nil)
        }
        do {
            switch try PostgresRunLock.acquire(state, runID: runID) {
            case .acquired(let lock): return (state, lock)
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
