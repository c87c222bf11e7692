import CloudSync
import CloudSyncHTTP
import Foundation

/// Files under keys: the key's file in the app data folder holds the file's bytes, sent from the file (resumably,
/// a chunk at a time, above ``resumableThreshold``) and downloaded into one.
extension DriveProvider: FileStoringProvider {
    /// The largest file Drive stores: 5 TB.
    public static let maxDriveFileBytes: Int64 = 5_000_000_000_000

    /// Drive's own limit, 5 TB.
    public var maxFileBytes: Int64? { Self.maxDriveFileBytes }

    /// Uploads the file as `key`'s file, as a value is written: one request up to ``resumableThreshold`` bytes (read
    /// into memory, no more than that), resumable ``chunkSize`` chunks read from the file above it.
    public func putFile(_ key: String, from source: String, size: Int64) async throws {
        try ensureWritable()
        let reader = try FilePartReader(path: source, provider: id, key: key)
        let entries = try await resolve([key], forWriting: true)
        try await write(key, .file(reader, size: Int(size)), entry: entries[StoreKey(key)])
    }

    /// The size of `key`'s file (`files.get` with `fields=size`); nil when it has none.
    public func fileSize(_ key: String) async throws -> Int64? {
        try ensureOpen()
        return try await withEntry(key) { fileID async throws(CloudSyncError) -> Int64? in
            let request = HTTPRequest(method: .get, url: url(filePath(fileID), [("fields", "size")]))
            let response = try await send(request, key: key)
            if response.status == 404 { return nil }
            guard response.isSuccess else { throw failure(response, request, key: key) }
            let size = try json(response, request)["size"]
            // Drive writes int64 fields as strings.
            guard let text = size as? String, let bytes = Int64(text) else {
                throw CloudSyncError(
                    .provider, "Drive answered the size of \(key)'s file as \(String(describing: size))",
                    provider: id, key: key)
            }
            return bytes
        }
    }

    /// Downloads `key`'s file (`alt=media`) straight into `destination`; false when it has none.
    public func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try ensureOpen()
        let found = try await withEntry(key) { fileID async throws(CloudSyncError) -> Bool? in
            let request = HTTPRequest(
                method: .get, url: url(filePath(fileID), [("alt", "media")]),
                downloadFile: URL(fileURLWithPath: destination), transferBytes: size)
            let response = try await send(request, key: key)
            if response.status == 404 { return nil }
            guard response.isSuccess else { throw failure(response, request, key: key) }
            return true
        }
        return found ?? false
    }

    /// `body`'s answer for `key`'s file id; nil when the key has no file.
    ///
    /// When the cached id is gone (`body` answers nil), the name is looked up again once.
    private func withEntry<T>(_ key: String, _ body: (String) async throws(CloudSyncError) -> T?)
        async throws(CloudSyncError) -> T?
    {
        guard let entry = try await resolve([key])[StoreKey(key)] else { return nil }
        if let answer = try await body(entry.id) { return answer }
        doubt(key)
        guard let again = try await search(key) else { return nil }
        return try await body(again.id)
    }
}
