import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Reads: one `alt=media` download per key, several at once.
extension DriveProvider {
    // MARK: Get

    /// Downloads each key's file (`alt=media`), several at once; nil for a key with no file.
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try ensureOpen()
        let entries = try await resolve(keys)
        return try await forEach(keys) { key async -> Result<String?, CloudSyncError> in
            do throws(CloudSyncError) {
                guard let entry = entries[StoreKey(key)] else { return .success(nil) }
                if let value = try await self.download(entry.id, key: key) { return .success(value) }
                // The cached id is gone: look again once.
                self.doubt(key)
                guard let again = try await self.search(key) else { return .success(nil) }
                return .success(try await self.download(again.id, key: key))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The file's content as text; nil when the file is gone (404).
    func download(_ fileID: String, key: String) async throws(CloudSyncError) -> String? {
        let request = HTTPRequest(method: .get, url: url(filePath(fileID), [("alt", "media")]))
        let response = try await send(request, key: key)
        if response.status == 404 { return nil }
        guard response.isSuccess else { throw failure(response, request, key: key) }
        guard let value = String(validating: response.body, as: UTF8.self) else {
            throw CloudSyncError(
                .decode,
                "the file \(key) in \(id)'s app data folder is not UTF-8 text (\(response.body.count) bytes); values "
                    + "are strings, so it was not written by CloudSync",
                provider: id, key: key)
        }
        return value
    }
}
