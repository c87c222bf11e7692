import CloudSync
import CloudSyncPipeline
import Foundation

/// The embedded default: a pipeline's state in its state directory (`state:`, created 0700).
///
/// The state is a SQLite file, `state.db` (``StateDatabase``), locked with `flock` on `run.lock`. One runner at a
/// time; such a state cannot be joined.
public struct DirectoryStateStore: PipelineStateStore {
    /// The store.
    public init() {}

    /// Every pipeline that declares no shared state.
    public func keeps(_ spec: PipelineSpec) -> Bool { spec.sharedState == nil }

    /// The state file's path.
    public func location(of spec: PipelineSpec) -> String { spec.state + "/state.db" }

    public func open(_ compiled: CompiledPipeline, access: StateAccess) throws(RunRefusal) -> OpenedState? {
        let spec = compiled.spec
        let path = location(of: spec)
        switch access {
        case .join:
            throw RunRefusal.cannotStart(
                CloudSyncError(
                    .config,
                    "only a pipeline whose state is in PostgreSQL can be joined; its runners share their work there"))
        case .read:
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            return OpenedState(state: try database(path, compiled, readOnly: true), lock: nil)
        case .writeExisting:
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            fallthrough
        case .write:
            let lock = try takeLock(in: spec.state)
            do throws(RunRefusal) {
                return OpenedState(state: try database(path, compiled, readOnly: false), lock: lock)
            } catch {
                lock.release()
                throw error
            }
        }
    }

    /// Creates the directory when missing and takes its lock without waiting.
    private func takeLock(in directory: String) throws(RunRefusal) -> RunLock {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            switch try RunLock.acquire(in: directory) {
            case .acquired(let lock): return lock
            case .heldBy(let pid): throw RunRefusal.locked(pid: pid, lockFile: directory + "/run.lock")
            }
        } catch let refusal as RunRefusal {
            throw refusal
        } catch {
            let reason = (error as? CloudSyncError)?.message ?? describeFileError(error)
            throw RunRefusal.cannotStart(
                CloudSyncError(
                    .config,
                    "cannot use the state directory \(directory): \(reason); check that it can be created and "
                        + "written, or point `state:` elsewhere"))
        }
    }

    private func database(_ path: String, _ compiled: CompiledPipeline, readOnly: Bool) throws(RunRefusal)
        -> StateDatabase
    {
        do {
            return try StateDatabase(path: path, codec: compiled.stateCodec, readOnly: readOnly)
        } catch {
            throw RunRefusal.cannotStart(error)
        }
    }
}
