import CloudSync
import Foundation

/// A dry run's view of a provider: reads go through, writes and removes are counted as done but never made.
struct DryRunProvider: ForwardingProvider {
    let wrapped: any Provider

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { items.map { _ in .success(()) } }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { keys.map { _ in .success(()) } }
}

/// One run of a pipeline at a time: a lock file in the state directory holding the running process's id.
struct RunLock {
    enum Outcome {
        case acquired(RunLock)
        case heldBy(Int32)
    }

    let path: String

    /// Takes the lock; a lock whose process is gone is stale and taken over.
    static func acquire(in directory: String) throws -> Outcome {
        let path = directory + "/run.lock"
        for _ in 0..<3 {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if descriptor >= 0 {
                let pid = "\(getpid())\n"
                _ = pid.withCString { write(descriptor, $0, strlen($0)) }
                close(descriptor)
                return .acquired(RunLock(path: path))
            }
            guard errno == EEXIST else {
                throw CloudSyncError(.config, "cannot create the lock \(path): \(String(cString: strerror(errno)))")
            }
            let text = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines)
            if let pid = text.flatMap({ Int32($0) }), pid > 0, kill(pid, 0) == 0 || errno == EPERM {
                return .heldBy(pid)
            }
            unlink(path)  // stale: its process is gone
        }
        throw CloudSyncError(.config, "cannot take the lock \(path): it keeps reappearing; is another run starting?")
    }

    func release() { unlink(path) }

    /// The live process holding the lock in `directory`, if one does; a lock whose process is gone holds nothing.
    static func holder(in directory: String) -> Int32? {
        let text = (try? String(contentsOfFile: directory + "/run.lock", encoding: .utf8))?.trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard let pid = text.flatMap({ Int32($0) }), pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return nil }
        return pid
    }
}

/// Raised when the run's task is cancelled; jobs look at it between batches.
final class InterruptFlag: Sendable {
    private let raised = Protected(false)
    func raise() { raised.withLock { $0 = true } }
    var isRaised: Bool { raised.withLock { $0 } }
}

/// Whether `text` matches the glob `pattern` (see ``Glob``); a malformed pattern matches nothing (the loader refuses
/// those in pipeline files).
package func globMatches(_ pattern: String, _ text: String) -> Bool {
    (try? Glob(pattern))?.matches(text) ?? false
}

/// A job's key selection: globs and exact keys, any of which may match.
func keyFilter(_ keys: [String]?) -> (@Sendable (String) -> Bool)? {
    guard let keys else { return nil }
    return { key in keys.contains { globMatches($0, key) } }
}

func iso8601(_ milliseconds: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    formatter.timeZone = TimeZone(identifier: "UTC")
    return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
}
