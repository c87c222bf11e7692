import CloudSync
import Foundation

/// The most deletions a sync job may make before it stops, from its `maxDeletes`.
public enum DeleteLimit: Sendable, Equatable {
    /// At most this many keys.
    case count(Int)
    /// At most this percentage of the keys the last sync left.
    case percent(Double)

    /// The default: half the keys, as rclone's bisync allows.
    public static let standard = DeleteLimit.percent(50)

    /// The limit as written in a pipeline file: a whole number, or a percentage like `"50%"`.
    public init?(text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("%") {
            guard let value = Double(trimmed.dropLast()), value >= 0, value <= 100 else { return nil }
            self = .percent(value)
        } else {
            guard let value = Int(trimmed), value >= 0 else { return nil }
            self = .count(value)
        }
    }

    /// How many deletions it allows when the last sync left `snapshotKeys` keys.
    package func allowed(snapshotKeys: Int) -> Int {
        switch self {
        case .count(let count): return count
        case .percent(let percent): return Int((Double(snapshotKeys) * percent / 100).rounded(.down))
        }
    }

    /// As written: `50%` or `1000`.
    public var description: String {
        switch self {
        case .count(let count): return "\(count)"
        case .percent(let percent):
            return percent == percent.rounded() ? "\(Int(percent))%" : "\(percent)%"
        }
    }
}

extension JobReport {
    /// Whether a job may make `count` deletions from `provider`, which holds `total` keys, under `limit`; when it
    /// may not (and `--force` was not given), the job ends `failed` with `ERR_TOO_MANY_DELETES`, `heldBack` counts
    /// them, and the message tells the user what to check (`check`) before allowing them once.
    package mutating func allowsDeletions(
        _ count: Int, of total: Int, in provider: String, limit: DeleteLimit, forced: Bool, job: String,
        heldBack: JobCount, check: String
    ) -> Bool {
        guard count > limit.allowed(snapshotKeys: total) && !forced else { return true }
        self[heldBack] = count
        status = .failed
        error = RunReport.Failure(
            key: "", provider: provider, code: ErrorCode.tooManyDeletes.rawValue,
            message:
                "this \(job) would remove \(count) of the \(total) keys \(provider) holds, more than maxDeletes "
                + "(\(limit.description)) allows, so it removed none; check \(check), then run again with --force to "
                + "allow them once")
        return false
    }

    /// Counts each key's outcome: `done` for a success, `failed` (with the failure recorded) otherwise.
    package mutating func count(
        _ outcomes: [Result<Void, CloudSyncError>], of keys: some Sequence<String>, done: JobCount, failed: JobCount
    ) {
        for (key, outcome) in zip(keys, outcomes) {
            switch outcome {
            case .success: add(1, to: done)
            case .failure(let error):
                record([KeyFailure(key: key, error: error)])
                add(1, to: failed)
            }
        }
    }
}
