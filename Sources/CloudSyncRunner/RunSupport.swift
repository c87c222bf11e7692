import CloudSync
import CloudSyncPipeline
import Foundation

/// A dry run's view of a provider: reads go through, writes and removes are counted as done but never made.
struct DryRunProvider: ForwardingProvider {
    let wrapped: any Provider

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { items.map { _ in .success(()) } }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { keys.map { _ in .success(()) } }

    /// The dry run's view of `provider`: one that keeps its file API when it has one, so files read as they would.
    static func wrapping(_ provider: any Provider) -> any Provider {
        provider is any FileStoringProvider ? DryRunFileProvider(wrapped: provider) : DryRunProvider(wrapped: provider)
    }
}

/// A dry run's view of a provider that stores files: files are read through its file API, and put ones, like set
/// values, are counted as done but never stored.
struct DryRunFileProvider: ForwardingProvider, FileStoringProvider {
    let wrapped: any Provider
    private var files: any FileStoringProvider { wrapped as! any FileStoringProvider }

    var maxFileBytes: Int64? { files.maxFileBytes }
    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] { items.map { _ in .success(()) } }
    func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] { keys.map { _ in .success(()) } }
    func putFile(_ key: String, from source: String, size: Int64) async throws {}
    func fileSize(_ key: String) async throws -> Int64? { try await files.fileSize(key) }
    func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try await files.getFile(key, to: destination, size: size)
    }
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
