import Foundation

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
        /// `ok`, `failed` (some keys failed, or a quota warning under failOnWarning), `error` (the job could not run),
        /// `interrupted` (stopped after a batch by a signal), `skipped` (not run because the run was interrupted).
        public var status: String
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
        public var requests: Int
        public var bytesRead: Int
        public var bytesWritten: Int
    }

    public var pipeline: String
    public var runId: String
    /// `ok`, `failed` or `interrupted`.
    public var status: String
    public var dryRun: Bool
    public var startedAt: String
    public var finishedAt: String
    public var durationMs: Int64
    public var jobs: [Job]
    public var outbox: Outbox
    public var providers: [Provider]

    /// Sorted keys, so reports diff cleanly.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }
}
