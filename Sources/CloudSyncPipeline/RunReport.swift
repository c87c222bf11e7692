import CloudSync
import Foundation

/// How a whole run ended; the command line maps it to an exit status.
public enum RunStatus: String, Codable, Sendable, CaseIterable {
    /// Every job ran and succeeded.
    case ok
    /// A job finished with failed keys or a quota warning under `failOnWarning`.
    case failed
    /// A job could not run at all.
    case error
    /// Stopped by SIGINT or SIGTERM.
    case interrupted
}

/// How one job ended.
public enum JobStatus: String, Codable, Sendable, CaseIterable {
    /// It ran and every key succeeded.
    case ok
    /// Some keys failed, or a quota warning under `failOnWarning`.
    case failed
    /// It could not run (see the job's `error`).
    case error
    /// Stopped after a batch by a signal.
    case interrupted
    /// Not run because the run was interrupted first.
    case skipped
}

/// The JSON report of one run (`schemas/report.schema.json`).
///
/// Holds keys, ids, codes and counts, never values or
/// secrets.
public struct RunReport: Codable, Sendable {
    public struct Failure: Codable, Sendable, Equatable {
        public var key: String
        public var provider: String?
        public var code: String
        public var message: String
    }

    public struct QuotaLine: Codable, Sendable, Equatable {
        public var provider: String
        public var usedBytes: Int64?
        /// Absent means unlimited.
        public var totalBytes: Int64?
        public var fraction: Double?
        public var warning: Bool
    }

    public struct Job: Codable, Sendable {
        public var name: String
        public var type: String
        public var status: JobStatus
        public var counts: [String: Int]
        public var failures: [Failure]
        /// Failures beyond the first 100, counted but not listed.
        public var failuresOmitted: Int
        /// Why the job could not run, for status `error`.
        public var error: Failure?
        public var quota: [QuotaLine]?
        /// The file an export wrote or an import read.
        public var file: String?
    }

    public struct Outbox: Codable, Sendable {
        public var pendingBefore: Int
        public var drained: Int
        public var dropped: [String: Int]
        public var pendingAfter: Int
    }

    public struct Provider: Codable, Sendable {
        public var id: String
        public var type: String
        public var available: Bool
        /// Why it was unavailable when the run ended (absent when available).
        public var unavailable: Unavailable?
        /// Requests the provider made, counted where they happen: one HTTP request or local call counts once.
        public var requests: Int
        public var bytesRead: Int
        public var bytesWritten: Int
        public var retries: Int
        public var throttled: Int
    }

    /// Why a provider was unavailable.
    public struct Unavailable: Codable, Sendable, Equatable {
        public var reason: UnavailableReason
        public var message: String
    }

    public var pipeline: String
    public var runId: String
    public var status: RunStatus
    public var dryRun: Bool
    public var startedAt: String
    public var finishedAt: String
    public var durationMs: Int64
    public var jobs: [Job]
    public var outbox: Outbox
    public var providers: [Provider]

    /// Sorted keys, so reports diff cleanly.
    public func json() -> String {
        String(decoding: (try? JSONEncoder.sorted.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }
}
