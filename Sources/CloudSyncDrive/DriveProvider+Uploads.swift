import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Writes: multipart or media uploads, and resumable uploads in chunks for large values.
extension DriveProvider {
    // MARK: Set

    /// Creates or updates each key's file, several at once: one request for a value up to
    /// ``resumableThreshold`` bytes whose file is known, resumable chunks above it.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureWritable()
        let entries = try await resolve(items.map(\.key), forWriting: true)
        return try await forEach(items) { item async -> Result<Void, CloudSyncError> in
            do throws(CloudSyncError) {
                try await self.write(item.key, .data(Data(item.value.utf8)), entry: entries[StoreKey(item.key)])
                return .success(())
            } catch {
                return .failure(error)
            }
        }
    }

    /// Uploads `body` as `key`'s file: over the file `entry` names (looked up again once if it is gone), else as a
    /// new file; then remembers its id and removes the key's duplicates.
    func write(_ key: String, _ body: DriveUploadBody, entry: Entry?) async throws(CloudSyncError) {
        var entry = entry
        var fileID: String?
        if let known = entry {
            fileID = try await upload(body, key: key, existing: known.id)
            if fileID == nil {
                // The cached id is gone: look again once, then create.
                doubt(key)
                entry = try await search(key)
                if let found = entry { fileID = try await upload(body, key: key, existing: found.id) }
            }
        }
        let created = fileID == nil
        if fileID == nil { fileID = try await upload(body, key: key, existing: nil) }
        guard let fileID else { return }
        cache.withLock { cache in
            cache.entries[StoreKey(key)] = Entry(id: fileID, duplicates: [])
            cache.names[fileID] = key
            cache.changes += 1
        }
        if !created, let duplicates = entry?.duplicates, !duplicates.isEmpty {
            let results = try await delete(duplicates.map { (key, $0) })
            for case .failure(let error) in results { throw error }
        }
    }

    /// Uploads `body` as a new file (`existing` nil) or over `existing`; returns the file id, or nil when `existing`
    /// is gone.
    func upload(_ body: DriveUploadBody, key: String, existing: String?) async throws(CloudSyncError) -> String? {
        if body.count > Self.resumableThreshold {
            return try await resumableUpload(body, key: key, existing: existing)
        }
        let body = try body.bytes(0..<body.count)
        let request: HTTPRequest
        let fields = ("fields", "id,name,modifiedTime")
        if let existing {
            request = HTTPRequest(
                method: .patch, url: url("/upload" + filePath(existing), [("uploadType", "media"), fields]),
                headers: ["Content-Type": "application/octet-stream"], body: body, isRetrySafe: true,
                transferBytes: Int64(body.count))
        } else {
            let boundary = MIMEMultipart.randomBoundary()
            let multipart = MIMEMultipart.build(
                [
                    MIMEMultipart.Part(
                        headers: ["Content-Type": "application/json; charset=UTF-8"], body: metadata(key)),
                    MIMEMultipart.Part(headers: ["Content-Type": "application/octet-stream"], body: body),
                ], boundary: boundary)
            // A retried create may leave two files of one name; reads and the next write settle that.
            request = HTTPRequest(
                method: .post, url: url("/upload/drive/v3/files", [("uploadType", "multipart"), fields]),
                headers: ["Content-Type": "multipart/related; boundary=\(boundary)"], body: multipart,
                isRetrySafe: true, transferBytes: Int64(body.count))
        }
        let response = try await send(request, key: key)
        if response.status == 404, existing != nil { return nil }
        guard response.isSuccess else { throw failure(response, request, key: key) }
        return try fileID(of: response, request, key: key)
    }

    func metadata(_ key: String) -> Data {
        (try? JSONSerialization.data(
            withJSONObject: ["name": key, "parents": ["appDataFolder"]], options: [.sortedKeys]))
            ?? Data()
    }

    func fileID(of response: HTTPResponse, _ request: HTTPRequest, key: String) throws(CloudSyncError)
        -> String
    {
        guard let id = try json(response, request)["id"] as? String, !id.isEmpty else {
            throw CloudSyncError(
                .provider, "Drive answered an upload of \(key) without the file's id", provider: self.id, key: key)
        }
        return id
    }

    /// The most interruptions one resumable upload sits out, and the most times it starts over after a 404.
    static let maxInterruptions = 5
    static let maxRestarts = 2

    /// Uploads `body` resumably: a session, then ``chunkSize`` chunks; after a failed chunk it asks where the
    /// session stands (`bytes */total`) and goes on from the server's `Range`; a session gone (404) starts over.
    func resumableUpload(_ body: DriveUploadBody, key: String, existing: String?) async throws(CloudSyncError)
        -> String?
    {
        var restarts = 0
        var interruptions = 0
        while true {
            guard let sessionURL = try await startSession(total: body.count, key: key, existing: existing) else {
                return nil
            }
            switch try await sendChunks(body, to: sessionURL, key: key, interruptions: &interruptions) {
            case .uploaded(let fileID):
                return fileID
            case .lost:
                restarts += 1
                guard restarts <= Self.maxRestarts else {
                    throw CloudSyncError(
                        .server, "Drive lost the upload session of \(key) \(restarts) times; try again later",
                        provider: id, key: key)
                }
                logger.log(.info, "Drive forgot the upload session of \(key); starting the upload again")
            }
        }
    }

    /// How an upload session's chunks ended: the file's id once the last was taken, or the session gone (404).
    private enum SessionOutcome {
        case uploaded(String)
        case lost
    }

    /// Starts a resumable upload session for `total` bytes of `key`, over the file `existing` or as a new file: the
    /// session URI, or nil when `existing` is gone.
    private func startSession(total: Int, key: String, existing: String?) async throws(CloudSyncError) -> URL? {
        let start = HTTPRequest(
            method: existing == nil ? .post : .patch,
            url: url(
                "/upload" + (existing.map(filePath) ?? "/drive/v3/files"),
                [("uploadType", "resumable"), ("fields", "id,name,modifiedTime")]),
            headers: [
                "Content-Type": "application/json; charset=UTF-8",
                "X-Upload-Content-Type": "application/octet-stream", "X-Upload-Content-Length": String(total),
            ],
            body: existing == nil ? metadata(key) : Data("{}".utf8), isRetrySafe: true)
        let started = try await send(start, key: key)
        if started.status == 404, existing != nil { return nil }
        guard started.isSuccess else { throw failure(started, start, key: key) }
        guard let location = started.headers["Location"], let sessionURL = URL(string: location) else {
            throw CloudSyncError(
                .provider, "Drive started a resumable upload of \(key) without a session URI (Location)",
                provider: id, key: key)
        }
        return sessionURL
    }

    /// Sends `body` to the upload session at `sessionURL` from its start, a chunk at a time, each from where the
    /// server's `Range` says the session stands.
    private func sendChunks(_ body: DriveUploadBody, to sessionURL: URL, key: String, interruptions: inout Int)
        async throws(CloudSyncError) -> SessionOutcome
    {
        let total = body.count
        var offset = 0
        while true {
            let end = min(offset + chunkSize, total)
            let chunk = HTTPRequest(
                method: .put, url: sessionURL,
                headers: [
                    "Content-Range": total == 0 ? "bytes */0" : "bytes \(offset)-\(end - 1)/\(total)",
                    "Content-Type": "application/octet-stream",
                ], body: try body.bytes(offset..<end), transferBytes: Int64(end - offset))
            let response = try await sendChunk(
                chunk, to: sessionURL, total: total, key: key, interruptions: &interruptions)
            if response.isSuccess { return .uploaded(try fileID(of: response, chunk, key: key)) }
            if response.status == 404 { return .lost }
            guard response.status == 308 else { throw failure(response, chunk, key: key) }
            offset = Self.nextOffset(range: response.headers["Range"])
            if let moved = response.headers["Location"], let movedURL = URL(string: moved), movedURL != sessionURL {
                logger.log(.debug, "Drive moved the upload session of \(key)")
            }
        }
    }

    /// Sends one chunk of an upload session: the session's answer (success, 308 or 404), or, after an interruption a
    /// retry may get past, its answer to where it stands (`bytes */total`).
    ///
    /// The upload as a whole sits out at most ``maxInterruptions``, counted in `interruptions`.
    private func sendChunk(
        _ chunk: HTTPRequest, to sessionURL: URL, total: Int, key: String, interruptions: inout Int
    ) async throws(CloudSyncError) -> HTTPResponse {
        let interruption: CloudSyncError
        do throws(CloudSyncError) {
            let response = try await send(chunk, key: key, client: chunkHTTP)
            if response.isSuccess || response.status == 308 || response.status == 404 { return response }
            interruption = failure(response, chunk, key: key)
        } catch {
            interruption = error
        }
        guard interruption.isRetryable else { throw interruption }
        interruptions += 1
        guard interruptions <= Self.maxInterruptions else { throw interruption }
        logger.log(
            .info,
            "the upload of \(key) to \(id) was interrupted (\(interruption.code)); asking Drive where it stands")
        let status = HTTPRequest(method: .put, url: sessionURL, headers: ["Content-Range": "bytes */\(total)"])
        return try await send(status, key: key)
    }

    /// The offset after `Range: bytes=0-N` (N + 1), or 0 when the server has nothing.
    static func nextOffset(range: String?) -> Int {
        guard let range, let dash = range.lastIndex(of: "-"), let last = Int(range[range.index(after: dash)...])
        else { return 0 }
        return last + 1
    }
}
