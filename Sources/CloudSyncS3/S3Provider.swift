import CloudSync
import CloudSyncHTTP
import CloudSyncOpenSSL
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One object per key in an S3 bucket (AWS, MinIO, Ceph, R2 or any S3-compatible server): object key = prefix + key,
/// object body = the (encoded) value, byte for byte.
///
/// Reads are `GetObject` (a missing key is `NoSuchKey`, read as nil), several at once up to `maxConcurrency`; writes
/// are `PutObject` with `Content-MD5`, or a multipart upload for values over ``multipartThreshold``; removes are one
/// `DeleteObjects` request per 1,000 keys with `Content-MD5`, its per-key `<Error>` items reported in their slots;
/// listing is `ListObjectsV2` with `encoding-type=url`, its continuation token as the cursor and the prefix stripped.
/// Every request goes through `CloudSyncHTTP.HTTPClient` (deadline, retry, SigV4, concurrency limit). S3 has no
/// usage figure that fits a quota, so ``quota()`` is nil.
public final class S3Provider: Provider {
    /// Values with more UTF-8 bytes than this are uploaded in parts: 64 MiB.
    public static let multipartThreshold = 64 * 1024 * 1024
    /// The size of each part but the last: 16 MiB (S3 takes 5 MiB to 5 GiB).
    public static let partSize = 16 * 1024 * 1024
    /// The longest object key S3 takes, in UTF-8 bytes.
    public static let maxObjectKeyBytes = 1024
    /// The most keys one `DeleteObjects` request or listing page carries.
    public static let batchLimit = 1000

    /// The provider's id in the store.
    public let id: String
    /// A file-tier provider of up to 1,000 keys a batch that lists and reports no quota; its key rule keeps prefix +
    /// key within 1,024 bytes.
    public let capabilities: ProviderCapabilities
    /// The bucket and how it is addressed.
    public let location: S3Location
    /// Prepended to every key to make its object key.
    public let prefix: String
    /// The access key id requests are signed with (not secret).
    public let accessKeyID: String
    let client: S3Client
    private let readOnly: Bool
    private let closed = Mutex(false)

    /// A provider on `location` under `prefix`, signing with `credentials`, sending through `transport`.
    ///
    /// - Parameters:
    ///   - context: the provider's id, clock (signing time, backoff), metrics and logger; the credentials are struck
    ///     from every log line.
    ///   - timeout: each request's deadline.
    ///   - maxConcurrency: requests in flight at once.
    ///   - readOnly: refuse writes and removes (dry runs).
    public init(
        location: S3Location, prefix: String = "", credentials: S3Credentials, transport: any HTTPTransport,
        context: ProviderContext, timeout: Duration = .seconds(30), maxConcurrency: Int = 16,
        retryPolicy: RetryPolicy = RetryPolicy(), readOnly: Bool = false
    ) {
        id = context.providerID
        self.location = location
        self.prefix = prefix
        self.accessKeyID = credentials.accessKeyID
        self.readOnly = readOnly
        capabilities = Self.capabilities(prefix: prefix, requestsAtOnce: maxConcurrency)
        var context = context
        context.logger = context.logger.redacting(
            [credentials.secretAccessKey] + (credentials.sessionToken.map { [$0] } ?? []))
        let http = HTTPClient(
            transport: transport, context: context,
            authenticator: S3Authenticator(credentials: credentials, region: location.region, clock: context.clock),
            retryPolicy: retryPolicy, timeout: timeout, maxConcurrency: maxConcurrency,
            serviceErrors: S3ErrorMapping.serviceErrors)
        client = S3Client(http: http, location: location, accessKeyID: credentials.accessKeyID)
    }

    /// What a provider with `prefix` can do; known before it is made.
    ///
    /// Gets and sets send one request per object, `requestsAtOnce` at a time, so the store's deadline bounds each
    /// round of them rather than a whole 1,000-object batch.
    public static func capabilities(prefix: String, requestsAtOnce: Int = 16) -> ProviderCapabilities {
        ProviderCapabilities(
            tier: .file, keyRules: [.maxUTF8Bytes(maxObjectKeyBytes - prefix.utf8.count)], batchLimit: batchLimit,
            canList: true, reportsQuota: false, listsInKeyOrder: true, cursorIsKey: true,
            requestsAtOnce: requestsAtOnce, conditionalWrites: true)
    }

    func ensureOpen() throws(CloudSyncError) {
        if closed.withLock({ $0 }) {
            throw CloudSyncError(
                .closed, "the s3 provider \(id) was closed; make a new one to reach \(location) again", provider: id)
        }
    }

    func ensureWritable() throws(CloudSyncError) {
        try ensureOpen()
        if readOnly {
            throw CloudSyncError(
                .unsupported, "the s3 provider \(id) is read-only here (a dry run); nothing was changed", provider: id)
        }
    }

    func objectKey(_ key: String) -> String { prefix + key }

    /// Stops serving; later calls fail with `ERR_CLOSED`.
    public func close() async {
        closed.withLock { $0 = true }
        client.http.close()
    }

    /// Available when one listing request of the prefix succeeds; otherwise why not: `signedOut` for refused
    /// credentials, `misconfigured` for a missing or forbidden bucket, `offline` when the endpoint cannot be reached.
    public func availability() async -> Availability {
        if closed.withLock({ $0 }) {
            return .unavailable(.closed, "the s3 provider \(id) was closed; make a new one to reach \(location) again")
        }
        do {
            _ = try await listPage(after: nil, maxKeys: 1)
            return .available
        } catch {
            return Availability(probeFailure: error)
        }
    }

    /// The bucket, endpoint and access key id: pointing the pipeline at another account or bucket changes it.
    public func accountIdentity() async throws -> String? {
        try ensureOpen()
        return "\(location.endpoint.absoluteString)/\(location.bucket) as \(accessKeyID)"
    }

    /// S3 has no usage figure that fits a quota (bucket sizes come from CloudWatch or an inventory), so nil.
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        return nil
    }

    // MARK: Get

    /// `GetObject` for each key, several at once; nil for `NoSuchKey`, `ERR_DECODE` for a body that is not UTF-8.
    ///
    /// Throws when the failure concerns the whole bucket (credentials refused, bucket missing, offline).
    public func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] {
        try ensureOpen()
        return try await forEach(keys) { key async -> Result<String?, CloudSyncError> in
            do throws(CloudSyncError) {
                return .success(try await self.getOne(key))
            } catch {
                return .failure(error)
            }
        }
    }

    /// `GetObject` for each key, several at once, each value with its `ETag`, the tag listings give and `If-Match`
    /// names.
    public func getVersioned(_ keys: [String]) async throws -> [Result<VersionedValue?, CloudSyncError>] {
        try ensureOpen()
        return try await forEach(keys) { key async -> Result<VersionedValue?, CloudSyncError> in
            do throws(CloudSyncError) {
                return .success(try await self.getOne(key, versioned: true).map { VersionedValue($0, version: $1) })
            } catch {
                return .failure(error)
            }
        }
    }

    private func getOne(_ key: String) async throws(CloudSyncError) -> String? {
        try await getOne(key, versioned: false)?.value
    }

    private func getOne(_ key: String, versioned: Bool) async throws(CloudSyncError)
        -> (value: String, version: String?)?
    {
        let request = HTTPRequest(method: .get, url: location.url(objectKey: objectKey(key)))
        let response = try await client.send(request, key: key)
        // Only S3's own word means absent: a 404 page of something that is not S3 (a wrong endpoint) is an error.
        if response.status == 404, S3ErrorBody(response.body).code == "NoSuchKey" { return nil }
        guard response.isSuccess else { throw client.failure(response, request, key: key) }
        guard let value = String(validating: response.body, as: UTF8.self) else {
            throw CloudSyncError(
                .decode,
                "the object \(objectKey(key)) in \(location) is not UTF-8 text (\(response.body.count) bytes); values "
                    + "are strings, so it was not written by CloudSync",
                provider: id, key: key)
        }
        return (value, versioned ? response.headers["ETag"] : nil)
    }

    // MARK: Set

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

    private func putOne(_ key: String, _ body: Data, condition: WriteCondition? = nil) async throws(CloudSyncError)
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
    private func uploadParts(
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

    // MARK: Remove

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
    private func deleteOne(_ key: String, condition: WriteCondition) async throws(CloudSyncError) {
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

    private func removeBatch(_ keys: [String]) async throws(CloudSyncError) -> [Result<Void, CloudSyncError>] {
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

    // MARK: List

    /// The key an object name under ``prefix`` stands for; nil for a name outside it or the prefix itself.
    ///
    /// The prefix is matched by bytes, as S3 matches it: `String.hasPrefix` would also take a canonically equivalent
    /// spelling.
    private func key(ofObject object: String) -> String? {
        guard object.utf8.count > prefix.utf8.count, object.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: object.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// One `ListObjectsV2` page of at most `limit` keys (1,000 at most), in S3's order (UTF-8 binary); the cursor is
    /// the last object listed, which the next page starts after.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        return try await listPage(after: cursor, maxKeys: min(max(limit, 1), Self.batchLimit))
    }

    /// One ListObjectsV2 page after the object `startAfter` (the cursor: the last object the previous page listed).
    ///
    /// `start-after` names a key, not a position in a listing, so removals of keys already listed cannot shift it
    /// (a continuation token is opaque, and some S3-compatible servers make it an offset).
    private func listPage(after startAfter: String?, maxKeys: Int) async throws(CloudSyncError) -> KeyPage {
        var query = "list-type=2&encoding-type=url&max-keys=\(maxKeys)&prefix=\(S3URIEncoding.encode(prefix))"
        if let startAfter { query += "&start-after=" + S3URIEncoding.encode(startAfter) }
        let request = HTTPRequest(method: .get, url: location.bucketURL(query: query))
        let response = try await client.sendExpectingSuccess(request)
        guard let result = XMLElement.parse(response.body), result.name == "ListBucketResult" else {
            throw CloudSyncError(
                .provider, "\(location) answered ListObjectsV2 with something other than a ListBucketResult",
                provider: id)
        }
        let urlEncoded = result.text(of: "EncodingType") == "url"
        let objects = result.children("Contents").compactMap { item -> (name: String, etag: String?)? in
            item.text(of: "Key").map { (urlEncoded ? HTTPForm.decode($0) : $0, item.text(of: "ETag")) }
        }
        // S3 lists in byte order; a server that orders a page otherwise still yields each key once: the next page
        // starts after the page's largest name, and a name at or before the cursor was yielded already.
        let fresh =
            startAfter.map { cursor in objects.filter { StoreKey.compareBytes($0.name, cursor) > 0 } } ?? objects
        var keys: [String] = []
        var versions: [String?] = []
        keys.reserveCapacity(fresh.count)
        versions.reserveCapacity(fresh.count)
        for object in fresh {
            guard let key = key(ofObject: object.name) else { continue }
            keys.append(key)
            // The ETag changes with the object's bytes (an MD5 of them, or of its parts for a multipart upload).
            versions.append(object.etag)
        }
        let truncated = result.text(of: "IsTruncated") == "true"
        guard truncated else { return KeyPage(keys: keys, nextCursor: nil, versions: versions) }
        guard let largest = fresh.map(\.name).max(by: StoreKey.bytesPrecede) else {
            throw CloudSyncError(
                .provider,
                "\(location) answered a truncated ListObjectsV2 page with nothing after \(startAfter ?? "the start"); "
                    + "the listing would not end",
                provider: id)
        }
        return KeyPage(keys: keys, nextCursor: largest, versions: versions)
    }

    // MARK: Batches

    /// Runs `body` for every element at once (``concurrentResults(_:_:)``) and returns the results in order.
    ///
    /// A failure that concerns the whole bucket (credentials, the bucket itself, the connection) is thrown for the
    /// batch only when no request of it succeeded: once one did, each failure is its own key's, and the keys that were
    /// written are reported written. A signature refused for one key while others signed alike were accepted says
    /// nothing about the secret: the server read that key's path otherwise than it was signed.
    private func forEach<Element: Sendable, Value: Sendable>(
        _ elements: [Element], _ body: @escaping @Sendable (Element) async -> Result<Value, CloudSyncError>
    ) async throws(CloudSyncError) -> [Result<Value, CloudSyncError>] {
        let results = await concurrentResults(elements, body)
        let someSucceeded = results.contains { if case .success = $0 { true } else { false } }
        if !someSucceeded {
            for result in results {
                if case .failure(let error) = result, S3ErrorMapping.isBatchWide(error) {
                    throw error.attributed(provider: id).concerningNoKey()
                }
            }
        }
        return results.map { result in
            result.mapError { error in
                guard someSucceeded, error.context?.serviceCode == "SignatureDoesNotMatch" else {
                    return error.attributed(provider: self.id)
                }
                return error.restated(
                    .provider,
                    "the server refused the signature of this key's request while it accepted others of the batch "
                        + "signed with the same credentials, so it reads this key's path otherwise than it was signed "
                        + "(a server that resolves . or .. segments, or encodes some characters its own way); rename "
                        + "the key, or check the server's handling of such names (HTTP 403 SignatureDoesNotMatch)"
                ).attributed(provider: self.id)
            }
        }
    }
}
