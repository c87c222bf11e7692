import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncPipelineState
import Foundation

/// One pipeline's state, held for the length of one command: the run lock, the outbox, the state database and the
/// providers' lifetimes; the state is a directory beside the pipeline or a PostgreSQL schema (`PipelineState`).
///
/// `cloudsync run`, the `outbox` commands and `history` all open one. A session that writes takes the lock, so two
/// commands never change one pipeline's state at once; a dry run takes nothing, opens every database read-only and
/// works on copies. ``close()`` closes the store and every provider (SQLite checkpoints its log) and releases the
/// lock.
public final class RunSession: Sendable {
    /// What the session may change.
    public enum Access: Sendable, Equatable {
        /// A real run: the lock is taken, state and providers are written.
        case write
        /// A dry run: nothing is locked or written; providers stand in empty where their storage does not exist.
        case dryRun
        /// A runner joining another's run (`--join`) to work on its sharded jobs: no lock (the starter holds it), no
        /// outbox and no account check (the starter's), providers and the PostgreSQL state written as in a run.
        case worker
    }

    /// The pipeline the session runs.
    public let compiled: CompiledPipeline
    /// Whether the session may change anything.
    public let access: Access
    /// The store over the pipeline's providers (its attached providers included), with the outbox.
    public let store: CloudStore
    /// The store's outbox; nil when the pipeline disables it (in a dry run, a copy in memory, the file left as it was).
    public let outbox: Outbox?
    /// Every provider the file declares, by id, as the store sees it.
    public let providers: [String: any Provider]
    /// The pipeline's state (a SQLite file, or a PostgreSQL schema); nil in a dry run of a pipeline that has never
    /// run.
    public let stateDatabase: (any PipelineState)?
    let metrics: [String: ProviderMetrics]
    private let drops: Protected<[String: Int]>
    /// Providers that could not be opened, with why; they stand in as unavailable.
    public let unopened: [String: CloudSyncError]
    private let lock: (any HeldRunLock)?
    private let isClosed = Protected(false)

    /// The state directory's files.
    public var outboxPath: String { compiled.spec.state + "/outbox.db" }

    /// Opens the pipeline's state (the state directory, created 0700, or the PostgreSQL schema `state:` names), takes
    /// the run lock unless this is a dry run, opens the outbox there, makes every provider through its factory, and
    /// builds the store.
    ///
    /// Throws `RunRefusal.locked(pid:lockFile:)` or `RunRefusal.lockedElsewhere(holder:lock:)` when another
    /// command holds the pipeline, `RunRefusal.stateUnavailable(_:)` when the PostgreSQL server cannot be used, and
    /// `RunRefusal.cannotStart(_:)` when something else cannot be opened; nothing opened is left open.
    public static func open(
        _ compiled: CompiledPipeline, access: Access = .write, runID: String? = nil,
        clock: any StoreClock = SystemClock(), logger: ProviderLogger = .disabled,
        stateStores: StateStoreRegistry = BuiltInStateStores.registry
    ) async throws(RunRefusal) -> RunSession {
        let spec = compiled.spec
        var keepLock = false
        let opened = try await openState(compiled, access: access, runID: runID, stores: stateStores)
        let stateDatabase = opened?.state
        let lock = opened?.lock
        defer {
            if !keepLock { opened?.close() }
        }
        let stateStore: any ProviderStateStore = stateDatabase ?? InMemoryProviderStateStore()

        let (made, unopened, metrics) = makeProviders(
            compiled, access: access, state: stateStore, clock: clock, logger: logger)
        let providers: [String: any Provider] =
            access == .dryRun ? made.mapValues(DryRunProvider.wrapping) : made
        var closeProviders = true
        defer {
            if closeProviders {
                let all = Array(made.values)
                Task { for provider in all { await provider.close() } }
            }
        }

        let drops = Protected<[String: Int]>([:])
        var outbox: Outbox?
        if spec.store.outbox.enabled, access != .worker {
            do {
                outbox = try makeOutbox(compiled, access: access, state: stateDatabase, drops: drops)
            } catch {
                let place = stateStores.store(for: spec)?.location(of: spec) ?? spec.state
                let cause = error as? CloudSyncError
                throw RunRefusal.cannotStart(
                    CloudSyncError(
                        cause?.code ?? .config, "cannot open the outbox in \(place): \(cause?.message ?? "\(error)")"))
            }
        }
        // Checked before the store exists, so a provider that reports the switch as a live account event too (Drive
        // does) reaches no store: a live event abandons the whole outbox, this check only the switched provider's.
        let unchecked =
            access == .write
            ? await noticeAccountSwitches(
                compiled, providers: providers, stateDatabase: stateDatabase, outbox: outbox, clock: clock) : [:]
        let store = try makeStore(compiled, providers: providers, outbox: outbox, clock: clock)
        keepLock = true
        closeProviders = false
        let session = RunSession(
            compiled: compiled, access: access, store: store, outbox: outbox, providers: providers,
            stateDatabase: stateDatabase, metrics: metrics, lock: lock, drops: drops, unopened: unopened,
            uncheckedAccounts: unchecked)
        return session
    }

    /// The store over the providers `store.providers` names, with the others attached: reachable by jobs, not by
    /// the store's routing.
    private static func makeStore(
        _ compiled: CompiledPipeline, providers: [String: any Provider], outbox: Outbox?, clock: any StoreClock
    ) throws(RunRefusal) -> CloudStore {
        let spec = compiled.spec
        var options = compiled.storeOptions
        options.outbox = outbox
        options.clock = clock
        do {
            return try CloudStore(
                providers: spec.store.providers.compactMap { providers[$0] },
                attached: spec.providers.filter { !spec.store.providers.contains($0.id) }.compactMap {
                    providers[$0.id]
                },
                options: options)
        } catch {
            throw RunRefusal.cannotStart(error)
        }
    }

    private init(
        compiled: CompiledPipeline, access: Access, store: CloudStore, outbox: Outbox?,
        providers: [String: any Provider], stateDatabase: (any PipelineState)?, metrics: [String: ProviderMetrics],
        lock: (any HeldRunLock)?, drops: Protected<[String: Int]>, unopened: [String: CloudSyncError],
        uncheckedAccounts: [String: CloudSyncError]
    ) {
        self.unopened = unopened
        self.uncheckedAccounts = uncheckedAccounts
        self.compiled = compiled
        self.access = access
        self.store = store
        self.outbox = outbox
        self.providers = providers
        self.stateDatabase = stateDatabase
        self.metrics = metrics
        self.lock = lock
        self.drops = drops
    }

    /// Outbox entries dropped so far, by reason.
    public var dropped: [String: Int] { drops.withLock { $0 } }

    /// Counts entries given up outside this session's outbox (by the runners of a shared drain), by reason.
    func noteDropped(_ counts: [String: Int]) {
        drops.withLock { $0.merge(counts, uniquingKeysWith: +) }
    }

    /// Providers whose account an earlier run recorded but this session could not check, with the error the check
    /// failed with; their queued writes are held back for the whole session.
    public let uncheckedAccounts: [String: CloudSyncError]

    /// The queued writes held back now, for each provider whose account could not be checked and that has any.
    public func heldWrites() -> [String: RunReport.OutboxHeld] {
        let held = outbox?.held ?? [:]
        var lines: [String: RunReport.OutboxHeld] = [:]
        for (provider, error) in uncheckedAccounts {
            guard let count = held[provider], count > 0 else { continue }
            let (writes, they) = count == 1 ? ("1 write", "it stays") : ("\(count) writes", "they stay")
            lines[provider] = RunReport.OutboxHeld(
                entries: count, code: error.code.rawValue,
                message:
                    "the account of `\(provider)` could not be checked (\(error.code): \(error.message)), so \(writes) "
                    + "queued for the account an earlier run saw went unsent, as whoever is signed in now may be someone "
                    + "else; \(they) queued for the next run that can check the account (if the check keeps failing, "
                    + "find out why the provider does not say who is signed in)")
        }
        return lines
    }

    /// The outbox limits `spec` sets.
    static func outboxLimits(_ spec: PipelineSpec) -> Outbox.Limits {
        Outbox.Limits(
            maxEntries: spec.store.outbox.maxEntries, maxAttempts: spec.store.outbox.maxAttempts,
            maxAge: .milliseconds(spec.store.outbox.maxAgeMs))
    }

    private static func makeOutbox(
        _ compiled: CompiledPipeline, access: Access, state: (any PipelineState)?, drops: Protected<[String: Int]>
    ) throws -> Outbox {
        let limits = outboxLimits(compiled.spec)
        let onDropped: @Sendable (OutboxEntry, Outbox.DropReason) -> Void = { _, reason in
            drops.withLock { $0[reason.rawValue, default: 0] += 1 }
        }
        guard access == .dryRun else {
            guard let state else { throw CloudSyncError(.config, "the state store opened no state for the run") }
            return try Outbox(storage: state.outboxStorage(), limits: limits, onDropped: onDropped)
        }
        // A dry run works on a copy of the queue and leaves the stored one as it is.
        let copy = InMemoryOutboxStorage()
        for entry in try state?.outboxEntries() ?? [] { try copy.replace(entry) }
        return try Outbox(storage: copy, limits: limits, onDropped: onDropped)
    }

    /// Compares each provider's account with the one the last run saw.
    ///
    /// After a switch, the outbox's entries for that provider (written for the previous account) are abandoned and
    /// its caches cleared, as a live account event would; entries for other providers were queued for accounts that
    /// did not change and stay. When the check fails (a slow network, a deadline, a 503) for a provider whose account
    /// an earlier run recorded, this session cannot tell a switch from no switch: that provider's entries are held,
    /// neither sent nor dropped, and the report says why (``heldWrites()``). When it fails for a provider no run has
    /// recorded an account for, the entries are held too and the account is remembered as unknown
    /// (``uncheckedIdentity``), so the next run that can check abandons them as another account's.
    ///
    /// Returns the providers whose account could not be checked, with why.
    private static func noticeAccountSwitches(
        _ compiled: CompiledPipeline, providers: [String: any Provider], stateDatabase: (any PipelineState)?,
        outbox: Outbox?, clock: any StoreClock
    ) async -> [String: CloudSyncError] {
        guard let stateDatabase else { return [:] }
        var unchecked: [String: CloudSyncError] = [:]
        for provider in compiled.spec.providers {
            guard let live = providers[provider.id] else { continue }
            let previous = try? stateDatabase.identity(of: provider.id)
            let current: String?
            do {
                current = try await live.accountIdentity()
            } catch {
                let failure =
                    (error as? CloudSyncError)
                    ?? CloudSyncError(.provider, "\(error)", provider: provider.id)
                unchecked[provider.id] = failure
                outbox?.hold(provider.id)
                // No run has recorded this provider's account, so what this run queues for it belongs to an account
                // nobody knows; remembered as such, the next run that can check treats whatever account it finds
                // as a change, and those writes never reach someone who signed in meanwhile.
                if previous == nil {
                    try? stateDatabase.remember(
                        identity: uncheckedIdentity, of: provider.id, at: iso8601(clock.nowMilliseconds())
                    )
                }
                continue
            }
            guard let identity = current else { continue }
            if let previous, previous != identity {
                outbox?.abandonForAccountChange(of: provider.id)
                await live.clearCaches()
            }
            try? stateDatabase.remember(
                identity: identity, of: provider.id, at: iso8601(clock.nowMilliseconds()))
        }
        return unchecked
    }

    /// The report's line for each provider the file declares: availability (with the reason when unavailable),
    /// probed under the store's deadline, and what the provider counted.
    public func providerLines() async -> [RunReport.Provider] {
        var lines: [RunReport.Provider] = []
        let held = heldWrites()
        for provider in compiled.spec.providers {
            let availability: Availability
            do {
                availability = try await store.availability(of: provider.id)
            } catch {
                availability = .unavailable(.other, error.message)
            }
            let reading = metrics[provider.id]?.reading ?? ProviderMetrics.Reading()
            lines.append(
                RunReport.Provider(
                    id: provider.id, type: provider.type, available: availability.isAvailable,
                    unavailable: availability.reason.map {
                        RunReport.Unavailable(reason: $0, message: availability.description)
                    },
                    requests: reading.requests, bytesRead: reading.bytesRead, bytesWritten: reading.bytesWritten,
                    retries: reading.retries, throttled: reading.throttled,
                    duplicates: reading.duplicates > 0 ? reading.duplicates : nil,
                    httpRequests: reading.httpRequests.isEmpty ? nil : reading.httpRequests,
                    waitMs: reading.httpRequests.isEmpty ? nil : reading.waitMilliseconds, outboxHeld: held[provider.id]
                ))
        }
        return lines
    }

    /// Closes the store and every provider, then releases the lock; later calls do nothing.
    public func close() async {
        let first = isClosed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        store.close()
        for provider in providers.values { await provider.close() }
        lock?.release()
        stateDatabase?.close()
    }
}

/// A provider that could not be opened (a missing database, an unmounted directory): unavailable, saying why, and
/// every call fails with the error that kept it from opening.
struct UnopenedProvider: Provider {
    let id: String
    let capabilities: ProviderCapabilities
    let error: CloudSyncError

    func availability() async -> Availability {
        .unavailable(error.code == .timeout ? .timedOut : .misconfigured, error.message)
    }
    func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { throw error }
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { throw error }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { throw error }
    func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage { throw error }
}
