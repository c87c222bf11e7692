import CloudSync
import Foundation

/// Keeps what `cloudsync login` yields in a pipeline's state database, where the provider finds it in its
/// `ProviderState` on every later run, and forgets it for `cloudsync logout`.
///
/// Each change takes the pipeline's lock for as long as it writes (never while a person signs in), so it never
/// lands in the middle of a run; the values are encrypted with the pipeline's state codec, as every provider value.
public enum PipelineCredentials {
    /// Whether a process (a run, an outbox flush) holds the pipeline's lock: nil when none does, else its id
    /// (nil inside when it has not written it yet; ``RunRefusal/holder(_:)`` words both).
    ///
    /// A holder that wrote no id is watched for up to a second, off the concurrency pool, in case it is only a child
    /// process that shares a just-released lock until it execs.
    public static func lockHolder(of compiled: CompiledPipeline) async -> Int32?? {
        let directory = compiled.spec.state
        let outcome = try? await offThePool { () throws(RunRefusal) in RunLock.holder(in: directory) }
        guard case .heldBy(let pid)? = outcome else { return nil }
        return .some(pid)
    }

    /// Keeps `credentials` for `provider` in the state database (created, 0600, in a 0700 state directory, when
    /// missing), replacing what was kept; returns the database's path.
    ///
    /// Throws ``RunRefusal/locked(pid:lockFile:)`` while another command holds the pipeline, and
    /// ``RunRefusal/cannotStart(_:)`` when the state cannot be written.
    @discardableResult
    public static func store(
        _ credentials: [StoredCredential: String], for provider: String, in compiled: CompiledPipeline
    ) throws(RunRefusal) -> String {
        try withStateDatabase(compiled, create: true) { database throws(CloudSyncError) in
            let state = ProviderState(provider: provider, store: database)
            for (credential, value) in credentials.sorted(by: { $0.key.name < $1.key.name }) {
                try state.replace(credential, with: value)
            }
        }
        return compiled.spec.sharedState?.description ?? compiled.spec.state + "/state.db"
    }

    /// Forgets `credentials` of `provider` and returns those that were kept.
    ///
    /// A pipeline without a state database has none, and nothing is created for it.
    public static func forget(
        _ credentials: [StoredCredential], for provider: String, in compiled: CompiledPipeline
    ) throws(RunRefusal) -> [StoredCredential] {
        guard
            compiled.spec.sharedState != nil
                || FileManager.default.fileExists(atPath: compiled.spec.state + "/state.db")
        else { return [] }
        var forgotten: [StoredCredential] = []
        try withStateDatabase(compiled, create: false) { database throws(CloudSyncError) in
            let state = ProviderState(provider: provider, store: database)
            for credential in credentials where try state.forget(credential) { forgotten.append(credential) }
        }
        return forgotten
    }

    private static func withStateDatabase(
        _ compiled: CompiledPipeline, create: Bool, _ body: (any PipelineState) throws(CloudSyncError) -> Void
    ) throws(RunRefusal) {
        if let shared = compiled.spec.sharedState {
            return try withSharedState(compiled, shared, body)
        }
        let directory = compiled.spec.state
        let lock: RunLock
        do {
            if create {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            switch try RunLock.acquire(in: directory) {
            case .acquired(let acquired): lock = acquired
            case .heldBy(let pid): throw RunRefusal.locked(pid: pid, lockFile: directory + "/run.lock")
            }
        } catch let refusal as RunRefusal {
            throw refusal
        } catch {
            let reason = (error as? CloudSyncError)?.message ?? describeFileError(error)
            throw RunRefusal.cannotStart(
                "cannot use the state directory \(directory): \(reason); check that it can be created and written")
        }
        defer { lock.release() }
        do {
            let database = try StateDatabase(path: directory + "/state.db", codec: compiled.stateCodec)
            defer { database.close() }
            try body(database)
        } catch {
            throw RunRefusal.cannotStart(error.message)
        }
    }

    /// ``withStateDatabase(_:create:_:)`` in a PostgreSQL schema: connected, migrated and locked for the body.
    private static func withSharedState(
        _ compiled: CompiledPipeline, _ shared: SharedStateSpec,
        _ body: (any PipelineState) throws(CloudSyncError) -> Void
    ) throws(RunRefusal) {
        let state: PostgresStateDatabase
        do {
            state = try PostgresStateDatabase(shared, pipeline: compiled.spec.name, codec: compiled.stateCodec)
        } catch {
            throw RunRefusal.stateUnavailable(error)
        }
        defer { state.close() }
        do {
            switch try PostgresRunLock.acquire(state) {
            case .acquired(let lock):
                defer { lock.release() }
                try body(state)
            case .heldBy(let holder, let lock):
                throw RunRefusal.lockedElsewhere(holder: holder, lock: lock)
            }
        } catch let refusal as RunRefusal {
            throw refusal
        } catch {
            throw RunRefusal.stateUnavailable(
                error as? CloudSyncError ?? CloudSyncError(.config, "the shared state failed: \(error)"))
        }
    }
}

extension CompiledPipeline {
    /// The codec provider values are encrypted with: the store's, else the first the file declares; nil for none.
    var stateCodec: (any ValueCodec)? {
        spec.store.codec.flatMap { codecs[$0] } ?? spec.codecs.first.flatMap { codecs[$0.id] }
    }
}
