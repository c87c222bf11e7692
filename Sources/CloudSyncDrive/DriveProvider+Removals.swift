import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Removes: `DELETE`s, through Drive's batch endpoint when there are several.
extension DriveProvider {
    // MARK: Remove

    /// Deletes each key's file and any duplicates.
    ///
    /// One `DELETE`, or batch requests of 100 when there are several; a key with no file succeeds.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureWritable()
        let entries = try await resolve(keys)
        var targets: [(key: String, id: String)] = []
        var seen: Set<String> = []
        for key in keys {
            guard let entry = entries[StoreKey(key)] else { continue }
            for fileID in [entry.id] + entry.duplicates where seen.insert(fileID).inserted {
                targets.append((key, fileID))
            }
        }
        let results = try await delete(targets)
        var failures: [String: CloudSyncError] = [:]
        for (target, result) in zip(targets, results) {
            if case .failure(let error) = result { failures[target.key] = error }
        }
        for key in keys where failures[key] == nil { forget(key) }
        return keys.map { key in failures[key].map { .failure($0) } ?? .success(()) }
    }

    /// Deletes the files, positionally; a file already gone (404) counts as deleted.
    func delete(_ targets: [(key: String, id: String)]) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        if targets.isEmpty { return [] }
        if targets.count == 1 {
            let request = HTTPRequest(method: .delete, url: url(filePath(targets[0].id)))
            let response = try await send(request, key: targets[0].key)
            if response.isSuccess || response.status == 404 { return [.success(())] }
            let error = failure(response, request, key: targets[0].key)
            if DriveErrorMapping.isBatchWide(error) { throw error.concerningNoKey() }
            return [.failure(error)]
        }
        var results: [Result<Void, CloudSyncError>] = []
        for start in stride(from: 0, to: targets.count, by: Self.batchLimit) {
            results += try await deleteBatch(Array(targets[start..<min(start + Self.batchLimit, targets.count)]))
        }
        return results
    }

    func deleteBatch(_ targets: [(key: String, id: String)]) async throws(CloudSyncError)
        -> [Result<Void, CloudSyncError>]
    {
        let boundary = MIMEMultipart.randomBoundary()
        let basePath = endpoint.path
        let parts = targets.enumerated().map { index, target in
            MIMEMultipart.Part(
                headers: ["Content-Type": "application/http", "Content-ID": "<item\(index)>"],
                body: Data("DELETE \(basePath)\(filePath(target.id)) HTTP/1.1\r\n\r\n".utf8))
        }
        let request = HTTPRequest(
            method: .post, url: url("/batch/drive/v3"),
            headers: ["Content-Type": "multipart/mixed; boundary=\(boundary)"],
            body: MIMEMultipart.build(parts, boundary: boundary), isRetrySafe: true)
        let response = try await sendExpectingSuccess(request)
        guard let answers = MIMEMultipart.parse(response.body, contentType: response.headers["Content-Type"]) else {
            throw CloudSyncError(
                .provider,
                "Drive answered a batch of \(targets.count) deletes with something other than "
                    + "multipart/mixed", provider: id)
        }
        var results = [Result<Void, CloudSyncError>?](repeating: nil, count: targets.count)
        for (position, answer) in answers.enumerated() {
            var index = position
            if let contentID = answer.headers["Content-ID"], let range = contentID.range(of: "item") {
                index = Int(contentID[range.upperBound...].prefix { $0.isNumber }) ?? position
            }
            guard targets.indices.contains(index), let head = MIMEMultipart.splitHead(answer.body),
                let statusLine = head.lines.first
            else { continue }
            let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            if (200..<300).contains(status) || status == 404 {
                results[index] = .success(())
            } else {
                let inner = HTTPResponse(
                    status: status, headers: MIMEMultipart.headers(Array(head.lines.dropFirst())), body: head.body)
                let innerRequest = HTTPRequest(method: .delete, url: url(filePath(targets[index].id)))
                results[index] = .failure(failure(inner, innerRequest, key: targets[index].key))
            }
        }
        let final = results.enumerated().map { index, result in
            result
                ?? .failure(
                    CloudSyncError(
                        .provider, "Drive's batch answer had no part for the delete of \(targets[index].key)",
                        provider: id, key: targets[index].key))
        }
        for case .failure(let error) in final where DriveErrorMapping.isBatchWide(error) {
            throw error.concerningNoKey()
        }
        return final
    }
}
