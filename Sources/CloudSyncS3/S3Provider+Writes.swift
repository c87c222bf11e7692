import CloudSync
import CloudSyncHTTP
import CloudSyncOpenSSL
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Writing values: a PUT per value (several at once), or a multipart upload for a large one, conditional on the ETag
/// or on nothing being there when asked.
extension S3Provider {
    /// `PutObject` (with `Content-MD5`) for each item, several at once; a multipart upload for a value over
    /// ``multipartThreshold`` bytes.
    public func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        try await set(items, conditions: items.map { _ in nil }).map { $0.map { _ in () } }
    }

    /// ``set(_:)`` with each write's condition sent along (`If-Match: <ETag>`, or `If-None-Match: *` for an absent
    /// key) so S3 checks it as the object is stored; each success carries the `ETag` S3 answered.
    ///
    /// A condition that does not hold (`412 PreconditionFailed`), or a concurrent conditional write of the same
    /// object (`409 ConditionalRequestConflict`), fails the key with `ERR_CHANGED_SINCE_READ`.
    public func set(_ items: [KeyValue], conditions: [WriteCondition?]) async throws
        -> [Result<String?, CloudSyncError>]
    {
        try ensureWritable()
        let work = zip(items, conditions).map { ($0, $1) }
        return try await forEach(work) { item, condition async -> Result<String?, CloudSyncError> in
            do throws(CloudSyncError) {
                let body = Data(item.value.utf8)
                if body.count > Self.multipartThreshold {
                    let parts = (body.count + Self.partSize - 1) / Self.partSize
                    return .success(
                        try await self.putMultipart(item.key, partCount: parts, atOnce: parts, condition: condition) {
                            number in
                            let start = (number - 1) * Self.partSize
                            return Data(body[start..<min(start + Self.partSize, body.count)])
                        })
                }
                return .success(try await self.putOne(item.key, body, condition: condition))
            } catch {
                return .failure(error)
            }
        }
    }

    func putOne(_ key: String, _ body: Data, condition: WriteCondition? = nil) async throws(CloudSyncError)
        -> String?
    {
        var headers: HTTPHeaders = ["Content-Type": "application/octet-stream", "Content-MD5": MD5.contentMD5(body)]
        Self.add(condition, to: &headers)
        let request = HTTPRequest(
            method: .put, url: location.url(objectKey: objectKey(key)), headers: headers, body: body)
        let response = try await client.send(request, key: key)
        do throws(CloudSyncError) {
            try unmet(condition, response, key: key)
        } catch {
            // A retried PUT whose first attempt landed finds its own object: that is this write's success.
            let ownETag = "\"" + Hex.encode(MD5.hash(body)) + "\""
            let now = try await client.send(HTTPRequest(method: .head, url: request.url), key: key)
            if now.isSuccess, now.headers["ETag"] == ownETag { return ownETag }
            throw error
        }
        guard response.isSuccess else { throw client.failure(response, request, key: key) }
        return response.headers["ETag"]
    }

    /// The request headers that make S3 check `condition` when the object is written or deleted.
    static func add(_ condition: WriteCondition?, to headers: inout HTTPHeaders) {
        switch condition {
        case .absent?: headers["If-None-Match"] = "*"
        case .version(let etag)?: headers["If-Match"] = etag
        case nil: break
        }
    }

    /// Throws `ERR_CHANGED_SINCE_READ` for S3's answers that a condition did not hold: `412 PreconditionFailed`,
    /// and `409 ConditionalRequestConflict` (another conditional write of the object was under way).
    func unmet(_ condition: WriteCondition?, _ response: HTTPResponse, key: String) throws(CloudSyncError) {
        guard let condition else { return }
        let code = S3ErrorBody(response.body).code
        if response.status == 412 || (response.status == 409 && code == "ConditionalRequestConflict") {
            throw condition.unmet(key: key, provider: id)
        }
    }

    /// Uploads `partCount` parts, each the bytes `part` gives for its number (from 1), `atOnce` of them at a time,
    /// then completes the upload; any failure aborts it so no parts are left behind to pay for.
    ///
    /// A `condition` is sent with the completion, where S3 checks it; the answer is the object's new `ETag`.
    @discardableResult
    func putMultipart(
        _ key: String, partCount: Int, atOnce: Int, condition: WriteCondition? = nil,
        part: @escaping @Sendable (Int) throws(CloudSyncError) -> Data
    ) async throws(CloudSyncError) -> String? {
        let object = objectKey(key)
        let create = HTTPRequest(
            method: .post, url: location.url(objectKey: object, query: "uploads"),
            headers: ["Content-Type": "application/octet-stream"], isRetrySafe: true)
        let created = try await client.sendExpectingSuccess(create, key: key)
        guard let uploadID = XMLElement.parse(created.body)?.text(of: "UploadId"), !uploadID.isEmpty else {
            throw CloudSyncError(
                .provider, "\(location) started a multipart upload of \(object) without an UploadId", provider: id,
                key: key)
        }
        let upload = "uploadId=" + S3URIEncoding.encode(uploadID)
        do throws(CloudSyncError) {
            let etags = await uploadParts(partCount, atOnce: atOnce) { number async -> Result<String, CloudSyncError> in
                do throws(CloudSyncError) {
                    let bytes = try part(number)
                    let request = HTTPRequest(
                        method: .put,
                        url: self.location.url(objectKey: object, query: "partNumber=\(number)&" + upload),
                        headers: ["Content-MD5": MD5.contentMD5(bytes)], body: bytes,
                        transferBytes: Int64(bytes.count))
                    let response = try await self.client.sendExpectingSuccess(request, key: key)
                    return .success(response.headers["ETag"] ?? "")
                } catch {
                    return .failure(error.attributed(provider: self.id))
                }
            }
            var parts = ""
            for (index, etag) in etags.enumerated() {
                parts +=
                    "<Part><PartNumber>\(index + 1)</PartNumber><ETag>\(XMLElement.escape(try etag.get()))</ETag></Part>"
            }
            var headers: HTTPHeaders = ["Content-Type": "application/xml"]
            Self.add(condition, to: &headers)
            let complete = HTTPRequest(
                method: .post, url: location.url(objectKey: object, query: upload), headers: headers,
                body: Data(
                    (#"<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#
                        + parts + "</CompleteMultipartUpload>").utf8), isRetrySafe: true)
            let completed = try await client.send(complete, key: key)
            try unmet(condition, completed, key: key)
            guard completed.isSuccess else { throw client.failure(completed, complete, key: key) }
            // CompleteMultipartUpload may fail after its 200 status line, with an <Error> body.
            let answer = XMLElement.parse(completed.body)
            if answer?.name == "Error" {
                var failed = completed
                failed.status = 500
                throw client.failure(failed, complete, key: key)
            }
            return answer?.text(of: "ETag") ?? completed.headers["ETag"]
        } catch {
            let abort = HTTPRequest(method: .delete, url: location.url(objectKey: object, query: upload))
            _ = try? await client.send(abort, key: key)
            throw error
        }
    }

    /// Runs `upload` for parts 1 through `count`, `atOnce` at a time; the results in part order.
    ///
    /// As one part ends the next starts, so the parts in flight (and in memory) never pass `atOnce`, and no part
    /// waits for a slower one of an earlier round. After a failure no further part starts; a part never started
    /// gets that failure.
    func uploadParts(
        _ count: Int, atOnce: Int, _ upload: @escaping @Sendable (Int) async -> Result<String, CloudSyncError>
    ) async -> [Result<String, CloudSyncError>] {
        var results = [Result<String, CloudSyncError>?](repeating: nil, count: count)
        var firstFailure: CloudSyncError?
        await withTaskGroup(of: (Int, Result<String, CloudSyncError>).self) { group in
            var next = 1
            while next <= min(max(1, atOnce), count) {
                let number = next
                group.addTask { (number, await upload(number)) }
                next += 1
            }
            while let (number, result) = await group.next() {
                results[number - 1] = result
                if case .failure(let error) = result, firstFailure == nil { firstFailure = error }
                guard firstFailure == nil, next <= count else { continue }
                let started = next
                group.addTask { (started, await upload(started)) }
                next += 1
            }
        }
        let unstarted = firstFailure ?? CloudSyncError(.provider, "a part was never uploaded", provider: id)
        return results.map { $0 ?? .failure(unstarted) }
    }
}
