import CloudSync
import CloudSyncPipeline
import Foundation

/// A dry run's view of a provider: reads go through, writes and removes are counted as done but never made.
struct DryRunProvider: ForwardingProvider {
    let wrapped: any Provider

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { items.map { _ in .success(()) } }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { keys.map { _ in .success(()) } }
}

/// Runs `work`, which blocks its thread for a while (connecting to PostgreSQL, migrating its schema), on a dispatch
/// worker thread: the concurrency pool has a thread per core, and a task blocking one stalls every other task of
/// the process meanwhile (in a test run, every other test).
func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws(RunRefusal) -> T) async throws(RunRefusal) -> T {
    let result: Result<T, RunRefusal> = await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(returning: Result { () throws(RunRefusal) -> T in try work() })
        }
    }
    return try result.get()
}
