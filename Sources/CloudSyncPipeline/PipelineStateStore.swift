import CloudSync

/// How a command means to use a pipeline's state when it opens it.
public enum StateAccess: Sendable, Equatable {
    /// A run, or a change such as `login`'s: the state created when missing and the run lock taken; `runID` names
    /// the run to runners looking for one to join.
    case write(runID: String?)
    /// As ``write(runID:)``, but nothing is created: nil when the pipeline has no state yet (`logout`).
    case writeExisting
    /// Read without the lock and without changing anything (dry runs, `history`, `serve`'s pages): nil when the
    /// pipeline has no state yet.
    case read
    /// A runner joining a run another started, which holds the lock: the state as it is, for the work they share.
    case join
}

/// A pipeline's state as a command opened it, with the run lock when it took one.
public struct OpenedState: Sendable {
    /// The state.
    public let state: any PipelineState
    /// The run lock, held until ``close()``; nil when the access took none.
    public let lock: (any HeldRunLock)?

    /// A state opened with `lock` held.
    public init(state: any PipelineState, lock: (any HeldRunLock)?) {
        self.state = state
        self.lock = lock
    }

    /// Gives the lock back and lets go of the state.
    public func close() {
        lock?.release()
        state.close()
    }
}

/// Where pipelines' state is kept, one kind of place per store: it says which pipelines' state it keeps (from what
/// their files declare under `state:`) and opens it.
///
/// A ``PipelineState`` that several runners can share offers ``SharedPipelineState`` through
/// ``PipelineState/shared``; nothing else about a store is asked for, so a new store is a new registration.
public protocol PipelineStateStore: Sendable {
    /// Whether this store keeps the state `spec` declares.
    func keeps(_ spec: PipelineSpec) -> Bool
    /// Where `spec`'s state is, for people: a path, or a server and schema; never a secret.
    func location(of spec: PipelineSpec) -> String
    /// Opens `compiled`'s state for `access`, migrating it when the access writes and taking the run lock when it is
    /// ``StateAccess/write(runID:)`` or ``StateAccess/writeExisting``; nil when the access creates nothing and there
    /// is no state yet.
    ///
    /// Throws ``RunRefusal/locked(pid:lockFile:)`` or ``RunRefusal/lockedElsewhere(holder:lock:)`` while another
    /// command holds the lock, ``RunRefusal/stateUnavailable(_:)`` when a server cannot be used, and
    /// ``RunRefusal/cannotStart(_:)`` for anything else, in words that say what to do.
    func open(_ compiled: CompiledPipeline, access: StateAccess) throws(RunRefusal) -> OpenedState?
}

/// The state stores a runner may open pipelines' state in, asked in the order they were registered.
public struct StateStoreRegistry: Sendable {
    private var stores: [any PipelineStateStore] = []

    /// An empty registry.
    public init() {}

    /// Adds `store`; a store registered earlier that keeps the same pipelines is asked first.
    public mutating func register(_ store: any PipelineStateStore) { stores.append(store) }

    /// The store that keeps `spec`'s state, or nil when none does.
    public func store(for spec: PipelineSpec) -> (any PipelineStateStore)? { stores.first { $0.keeps(spec) } }

    /// Opens `compiled`'s state with the store that keeps it (see ``PipelineStateStore/open(_:access:)``).
    public func open(_ compiled: CompiledPipeline, access: StateAccess) throws(RunRefusal) -> OpenedState? {
        guard let store = store(for: compiled.spec) else {
            throw RunRefusal.cannotStart(
                CloudSyncError(
                    .config, "no state store this program registers keeps the state of pipeline \(compiled.spec.name)"))
        }
        return try store.open(compiled, access: access)
    }
}

extension StateStoreRegistry {
    /// `body` over `compiled`'s state opened for `access` (nil when the access creates nothing and there is none yet),
    /// closed after; a refusal to open it is thrown as its error (``RunRefusal/error``).
    package func withState<T>(
        _ compiled: CompiledPipeline, access: StateAccess, _ body: ((any PipelineState)?) throws(CloudSyncError) -> T
    ) throws(CloudSyncError) -> T {
        let opened: OpenedState?
        do throws(RunRefusal) {
            opened = try open(compiled, access: access)
        } catch {
            throw error.error
        }
        defer { opened?.close() }
        return try body(opened?.state)
    }
}
