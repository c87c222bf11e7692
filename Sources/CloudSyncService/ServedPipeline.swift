import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation
import Synchronization

/// What the service knows of one pipeline file: the version it runs, what it is doing, and what its runs, skipped
/// slots and outbox flushes added up to since the service started.
///
/// Read by the HTTP handlers on their own threads, so everything sits behind one lock and is copied out as a
/// ``PipelineStatus``.
final class ServedPipeline: Sendable {
    /// The most recent reports kept in memory, for the page's charts and `/api/runs/ID`.
    static let recentLimit = 50

    enum Activity: Sendable {
        case idle
        case running(since: Date, trigger: RunTrigger)
        case flushing
    }

    struct Record: Sendable {
        var compiled: CompiledPipeline
        /// Why the file on disk did not load at the last reload; the version above keeps running.
        var loadError: String?
        var activity = Activity.idle
        var nextRun: SlotPlanner.Due?
        var recent: [RunReport] = []
        var runsByStatus: [RunStatus: Int] = [:]
        var skippedSlots: [SkipReason: Int] = [:]
        var lastLagSeconds: Double?
        var lastRefusal: String?
        var providerTotals: [String: ProviderTotals] = [:]
        /// What waits in the outbox by provider, as the last run or flush left it.
        var outboxPending: [String: Int] = [:]
        var flushes = FlushTotals()
    }

    let file: String
    private let record: Mutex<Record>
    /// Bumped by every change, so answers rendered from the status can be kept until it moves.
    private let changes: ChangeCounter

    init(file: String, compiled: CompiledPipeline, recent: [RunReport], changes: ChangeCounter) {
        self.file = file
        self.changes = changes
        var initial = Record(compiled: compiled)
        initial.recent = Array(recent.suffix(Self.recentLimit))
        if let last = initial.recent.last { initial.outboxPending = last.outbox.pendingByProvider ?? [:] }
        record = Mutex(initial)
    }

    var compiled: CompiledPipeline { record.withLock { $0.compiled } }
    /// What it is doing now, without copying the rest of its status.
    var activity: Activity { record.withLock { $0.activity } }
    /// Whether a run of it is in progress.
    var isRunning: Bool {
        if case .running = activity { return true }
        return false
    }
    var name: String { compiled.spec.name }

    func update<T>(_ body: (inout Record) -> T) -> T {
        defer { changes.bump() }
        return record.withLock { body(&$0) }
    }

    /// Takes the pipeline for a run when it is idle; returns false when something else has it.
    func beginRun(_ trigger: RunTrigger, at now: Date) -> Bool {
        defer { changes.bump() }
        return record.withLock { record in
            guard case .idle = record.activity else { return false }
            record.activity = .running(since: now, trigger: trigger)
            return true
        }
    }

    /// Takes the pipeline for an outbox flush when it is idle.
    func beginFlush() -> Bool {
        defer { changes.bump() }
        return record.withLock { record in
            guard case .idle = record.activity else { return false }
            record.activity = .flushing
            return true
        }
    }

    /// Notes a finished run: its status, lag, providers' costs, outbox and report.
    func finishRun(_ report: RunReport, lag: Double?) {
        defer { changes.bump() }
        record.withLock { record in
            record.activity = .idle
            record.runsByStatus[report.status, default: 0] += 1
            record.lastLagSeconds = lag
            record.lastRefusal = nil
            for provider in report.providers {
                record.providerTotals[provider.id, default: ProviderTotals()].add(provider)
            }
            if !report.dryRun { record.outboxPending = report.outbox.pendingByProvider ?? record.outboxPending }
            record.recent.append(report)
            if record.recent.count > Self.recentLimit {
                record.recent.removeFirst(record.recent.count - Self.recentLimit)
            }
        }
    }

    /// Notes a slot that did not run, and why.
    func skip(_ reason: SkipReason, message: String? = nil) {
        defer { changes.bump() }
        record.withLock { record in
            record.skippedSlots[reason, default: 0] += 1
            if let message { record.lastRefusal = message }
        }
    }

    /// Ends a run that never started (refused) or a flush.
    func becomeIdle() {
        defer { changes.bump() }
        record.withLock { $0.activity = .idle }
    }

    /// What the status endpoints show, copied out.
    var status: PipelineStatus {
        record.withLock { record in
            var running: PipelineStatus.Running?
            if case .running(let since, let trigger) = record.activity {
                running = PipelineStatus.Running(since: since, trigger: trigger)
            }
            if case .flushing = record.activity { running = nil }
            return PipelineStatus(
                name: record.compiled.spec.name, file: file, schedule: record.compiled.spec.schedule,
                autoFlushMs: record.compiled.spec.store.outbox.autoFlushMs, loadError: record.loadError,
                running: running, flushing: { if case .flushing = record.activity { true } else { false } }(),
                nextRun: record.nextRun, recent: record.recent, runsByStatus: record.runsByStatus,
                skippedSlots: record.skippedSlots, lastLagSeconds: record.lastLagSeconds,
                lastRefusal: record.lastRefusal, providerTotals: record.providerTotals,
                outboxPending: record.outboxPending, flushes: record.flushes,
                stateIsShared: record.compiled.spec.sharedState != nil)
        }
    }
}

/// A count of changes to what the service shows, so answers rendered from it can be reused until it moves.
final class ChangeCounter: Sendable {
    private let value = Atomic<UInt64>(0)

    func bump() { value.add(1, ordering: .releasing) }

    var current: UInt64 { value.load(ordering: .acquiring) }
}

/// Why a run started.
package enum RunTrigger: String, Sendable, Codable {
    /// Its slot came.
    case schedule
    /// A slot missed while the service was down (`catchUp`).
    case catchUp
    /// `POST /api/pipelines/NAME/run`.
    case api
}

/// Why a slot did not run.
package enum SkipReason: String, Sendable, Codable, CaseIterable {
    /// The pipeline's previous run was still running.
    case running
    /// Another process (a `cloudsync run`, another host) held the pipeline's lock.
    case locked
    /// The run could not start: its state or a provider could not be opened.
    case cannotStart
    /// Another host serving the pipeline on the same PostgreSQL state claimed the slot and runs it.
    case claimedElsewhere
}

/// What one provider cost over the runs since the service started.
package struct ProviderTotals: Sendable, Equatable, Codable {
    package var requests = 0
    package var bytesRead = 0
    package var bytesWritten = 0
    package var retries = 0
    package var throttled = 0

    mutating func add(_ line: RunReport.Provider) {
        requests += line.requests
        bytesRead += line.bytesRead
        bytesWritten += line.bytesWritten
        retries += line.retries
        throttled += line.throttled
    }
}

/// What the outbox flushes between runs did since the service started.
package struct FlushTotals: Sendable, Equatable, Codable {
    /// Flushes that ran.
    package var runs = 0
    /// Entries delivered.
    package var drained = 0
    /// Entries given up.
    package var dropped = 0
    /// Flushes that could not open the pipeline or failed.
    package var failures = 0
    /// When the last flush ended.
    package var lastAt: Date?
}

/// One pipeline as the HTTP endpoints see it.
package struct PipelineStatus: Sendable {
    package struct Running: Sendable {
        package var since: Date
        package var trigger: RunTrigger
    }

    package var name: String
    package var file: String
    package var schedule: PipelineSchedule?
    package var autoFlushMs: Int64?
    package var loadError: String?
    package var running: Running?
    package var flushing: Bool
    package var nextRun: SlotPlanner.Due?
    /// Oldest first, at most ``ServedPipeline/recentLimit``.
    package var recent: [RunReport]
    package var runsByStatus: [RunStatus: Int]
    package var skippedSlots: [SkipReason: Int]
    package var lastLagSeconds: Double?
    package var lastRefusal: String?
    package var providerTotals: [String: ProviderTotals]
    package var outboxPending: [String: Int]
    package var flushes: FlushTotals
    package var stateIsShared: Bool
}
