import CloudSync
import CloudSyncHTTP
import CloudSyncOpenSSL
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Removing values: DeleteObjects in batches of up to 1,000 keys, or a DeleteObject per key with a condition.
extension S3Provider {
    /// ``remove(_:)`` for the unconditional keys, and one `DeleteObject` with `If-Match` for each conditional one,
    /// several at once: a key whose `ETag` changed (`412`) fails with `ERR_CHANGED_SINCE_READ`, one already gone
    /// (`404`) is removed.
    public func remove(_ keys: [String], conditions: [WriteCondition?]) async throws
        -> [Result<Void, CloudSyncError>]
    {
        try ensureWritable()
        let conditional = keys.indices.filter { conditions[$0] != nil }
        guard !conditional.isEmpty else { return try await remove(keys) }
        let plain = keys.indices.filter { conditions[$0] == nil }
        var results = [Result<Void, CloudSyncError>?](repeating: nil, count: keys.count)
        for (index, result) in zip(plain, try await remove(plain.map { keys[$0] })) { results[index] = result }
        // One `DeleteObject` a key, with `If-Match`: the condition S3 documents for deletes and moto checks.
        let work = conditional.map { (keys[$0], conditions[$0]!) }
        let answers = try await forEach(work) { key, condition async -> Result<Void, CloudSyncError> in
            do throws(CloudSyncError) {
                try await self.deleteOne(key, condition: condition)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        for (index, result) in zip(conditional, answers) { results[index] = result }
        return results.map { $0! }
    }

    /// Deletes one object if it still meets `condition`; a missing object is removed already.
    func deleteOne(_ key: String, condition: WriteCondition) async throws(CloudSyncError) {
        let url = location.url(objectKey: objectKey(key))
        guard case .version = condition else {
            // S3 documents no `If-None-Match` for deletes: removing a key on the condition that it is absent changes
            // nothing either way, so only whether it is absent is asked.
            let response = try await client.send(HTTPRequest(method: .head, url: url), key: key)
            if response.status == 404 { return }
            guard response.isSuccess else {
                throw client.failure(response, HTTPRequest(method: .head, url: url), key: key)
            }
            throw condition.unmet(key: key, provider: id)
        }
        var headers: HTTPHeaders = [:]
        Self.add(condition, to: &headers)
        let request = HTTPRequest(method: .delete, url: url, headers: headers, isRetrySafe: true)
        let response = try await client.send(request, key: key)
        // `If-Match` on a key no longer there: 404, and nothing is left to remove.
        if response.status == 404 { return }
        try unmet(condition, response, key: key)
        guard response.isSuccess else { throw client.failure(response, request, key: key) }
    }

    /// Removes with `DeleteObjects`, 1,000 keys a request, in quiet mode, with `Content-MD5`.
    ///
    /// The answer lists only the keys that failed, each reported in its slot; removing a missing key succeeds.
    public func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
        try ensureWritable()
        var results: [Result<Void, CloudSyncError>] = []
        for start in stride(from: 0, to: keys.count, by: Self.batchLimit) {
            results += try await removeBatch(Array(keys[start..<min(start + Self.batchLimit, keys.count)]))
        }
        return results
    }

    func removeBatch(_ keys: [String]) async throws(CloudSyncError) -> [Result<Void, CloudSyncError>] {
        let objects = keys.map { "<Object><Key>\(XMLElement.escape(objectKey($0)))</Key></Object>" }.joined()
        let body = Data(
            (#"<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#
                + "<Quiet>true</Quiet>" + objects + "</Delete>").utf8)
        let request = HTTPRequest(
            method: .post, url: location.bucketURL(query: "delete"),
            headers: ["Content-Type": "application/xml", "Content-MD5": MD5.contentMD5(body)], body: body,
            isRetrySafe: true)
        let response = try await client.sendExpectingSuccess(request)
        guard let result = XMLElement.parse(response.body), result.name == "DeleteResult" else {
            throw CloudSyncError(
                .provider, "\(location) answered DeleteObjects with something other than a DeleteResult", provider: id)
        }
        var failures: [StoreKey: CloudSyncError] = [:]
        for item in result.children("Error") {
            guard let object = item.text(of: "Key"), let key = key(ofObject: object) else { continue }
            let code = item.text(of: "Code") ?? "InternalError"
            let message = item.text(of: "Message") ?? ""
            if code == "AccessDenied" {
                let denied = HTTPResponse(
                    status: 403, body: Data("<Error><Code>AccessDenied</Code><Message/></Error>".utf8))
                failures[StoreKey(key)] = client.failure(denied, request, key: key)
            } else {
                failures[StoreKey(key)] = CloudSyncError(
                    code == "InternalError" || code == "SlowDown" ? .server : .provider,
                    "\(location) could not remove the object \(object) (\(code): \(message))", provider: id, key: key)
            }
        }
        return keys.map { key in failures[StoreKey(key)].map { .failure($0) } ?? .success(()) }
    }
}
