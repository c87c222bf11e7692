import CloudSync
import CloudSyncPipeline

/// The outbox drain before a run's first job, shared by every runner of the run when the state is in PostgreSQL.
///
/// The runner that starts the run opens it (``start(runID:held:)``), claims and delivers entries like any runner that
/// joins (``work(until:)``), then closes it (``finish()``), which waits for every claim in flight: from then on no runner
/// delivers a queued write, so the jobs' own writes can never be overtaken by an older queued one. Each claim is a
/// batch of entries no other runner holds, delivered and recorded before it is let go (`SharedOutboxDrainSession`); the
/// outbox's own rules decide each outcome (``Outbox/disposition(of:outcome:now:)``), so a drain by four runners
/// delivers, reschedules and drops exactly as one runner's flush would, and delivers each entry once.
final class SharedOutboxDrain: Sendable {
    /// Entries one claim takes: a few provider batches, so a claim's transaction stays short.
    static let claimSize = 200

    private let session: any SharedOutboxDrainSession
    private let store: CloudStore
    /// The outbox whose rules (limits, backoff) decide what an outcome makes of an entry.
    private let rules: Outbox
    private let clock: any StoreClock
    private let runner: String

    private init(
        session: any SharedOutboxDrainSession, store: CloudStore, rules: Outbox, clock: any StoreClock, runner: String
    ) {
        self.session = session
        self.store = store
        self.rules = rules
        self.clock = clock
        self.runner = runner
    }

    /// A drain over `state`'s outbox, delivering through `store` under `rules`, as `runner` in the counts.
    static func open(
        _ state: any SharedPipelineState, store: CloudStore, rules: Outbox, clock: any StoreClock, runner: String
    ) async throws(CloudSyncError) -> SharedOutboxDrain {
        SharedOutboxDrain(
            session: try await state.openOutboxDrain(), store: store, rules: rules, clock: clock,
            runner: runner)
    }

    /// Ends its session.
    func close() async { await session.close() }

    /// Opens the drain of run `runID`; entries for `held` providers stay queued, untouched.
    ///
    /// It hands out the entries due now, as one runner's flush takes them: one rescheduled during the drain waits for
    /// the next run rather than being retried again at once by another runner.
    func start(runID: String, held: [String]) async throws(CloudSyncError) {
        let now = clock.nowMilliseconds()
        try await session.start(runID: runID, held: held, dueBy: now, at: iso8601(now))
    }

    /// Whether a run's drain is open, for a runner that joins.
    func isOpen() async throws(CloudSyncError) -> Bool { try await session.isOpen() }

    /// Claims and delivers due entries until none is left to claim or the drain closes; returns how many it claimed.
    ///
    /// Entries of providers this runner finds unavailable are left to the others; once `interrupt` is raised it
    /// claims no more (the claim in hand is finished and stored).
    @discardableResult
    func work(until interrupt: InterruptFlag) async throws(CloudSyncError) -> Int {
        var unavailable: [String] = []
        var total = 0
        while !interrupt.isRaised {
            var found: [String] = []
            let claimed = try await session.claim(limit: Self.claimSize, excluding: unavailable, runner: runner) {
                entries in
                let (settlement, unreachable) = await settle(
                    entries, now: clock.nowMilliseconds(), skipping: unavailable)
                found = unreachable
                return settlement
            }
            unavailable += found
            guard let claimed, claimed > 0 else { return total }
            total += claimed
        }
        return total
    }

    /// Closes the drain once every runner's claim has ended; returns what each runner counted.
    func finish() async throws(CloudSyncError) -> [String: [String: Int]] { try await session.finish() }

    /// Delivers `entries` (each provider's sets and removes at once) and decides each outcome; entries of providers
    /// found unavailable now are left as they are, and those providers returned.
    private func settle(_ entries: [OutboxEntry], now: Int64, skipping unavailable: [String]) async
        -> (DrainSettlement, unavailable: [String])
    {
        var settlement = DrainSettlement()
        var due: [OutboxEntry] = []
        for entry in entries {
            if rules.isExpired(entry, now: now) {
                settlement.removed.append(entry.id)
                settlement.counts["dropped.\(Outbox.DropReason.expired.rawValue)", default: 0] += 1
            } else {
                due.append(entry)
            }
        }
        var groups: [String: [OutboxEntry]] = [:]
        for entry in due { groups["\(entry.operation.rawValue) \(entry.provider)", default: []].append(entry) }
        typealias Delivered = (provider: String, outcomes: [(OutboxEntry, Result<Void, CloudSyncError>)]?)
        let delivered = await withTaskGroup(of: Delivered.self) { group in
            for entries in groups.values {
                group.addTask { [store] in
                    let provider = entries[0].provider
                    // Not reachable from here: its entries stay, unattempted, for a runner that can reach it.
                    guard (try? await store.availability(of: provider))?.isAvailable == true,
                        let results = try? await store.deliverQueued(entries, to: provider)
                    else { return (provider, nil) }
                    return (provider, Array(zip(entries, results)))
                }
            }
            return await group.reduce(into: [Delivered]()) { $0.append($1) }
        }
        let skipped = Set(delivered.filter { $0.outcomes == nil }.map(\.provider))
        for (entry, outcome) in delivered.flatMap({ $0.outcomes ?? [] }) {
            switch rules.disposition(of: entry, outcome: outcome, now: clock.nowMilliseconds()) {
            case .delivered:
                settlement.removed.append(entry.id)
                settlement.counts["drained", default: 0] += 1
            case .dropped(let reason):
                settlement.removed.append(entry.id)
                settlement.counts["dropped.\(reason.rawValue)", default: 0] += 1
            case .rescheduled(let next):
                settlement.rescheduled.append(next)
            }
        }
        return (settlement, skipped.subtracting(unavailable).sorted())
    }
}

extension SharedOutboxDrain {
    /// The drained count and the dropped ones by reason, summed over every runner of `counts`.
    static func totals(_ counts: [String: [String: Int]]) -> (
        drained: Int, dropped: [String: Int], byRunner: [String: Int]
    ) {
        var drained = 0
        var dropped: [String: Int] = [:]
        var byRunner: [String: Int] = [:]
        for (runner, named) in counts {
            for (name, value) in named {
                if name == "drained" {
                    drained += value
                    byRunner[runner, default: 0] += value
                } else if name.hasPrefix("dropped.") {
                    dropped[String(name.dropFirst("dropped.".count)), default: 0] += value
                }
            }
        }
        return (drained, dropped, byRunner)
    }
}
