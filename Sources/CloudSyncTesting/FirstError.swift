import CloudSync

/// The error a provider call ended with: the one it threw, or the first key's failure in its answer; nil when it
/// succeeded for every key.
public func firstError<T>(_ call: () async throws -> [Result<T, CloudSyncError>]) async -> CloudSyncError? {
    do {
        for case .failure(let error) in try await call() { return error }
        return nil
    } catch let error as CloudSyncError {
        return error
    } catch {
        return CloudSyncError(.provider, "threw \(error)")
    }
}
