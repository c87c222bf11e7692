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
    let readOnly: Bool
    let closed = Mutex(false)

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

    func getOne(_ key: String) async throws(CloudSyncError) -> String? {
        try await getOne(key, versioned: false)?.value
    }

    func getOne(_ key: String, versioned: Bool) async throws(CloudSyncError)
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

    // MARK: Batches

    /// Runs `body` for every element at once (``concurrentResults(_:_:)``) and returns the results in order.
    ///
    /// A failure that concerns the whole bucket (credentials, the bucket itself, the connection) is thrown for the
    /// batch only when no request of it succeeded: once one did, each failure is its own key's, and the keys that were
    /// written are reported written. A signature refused for one key while others signed alike were accepted says
    /// nothing about the secret: the server read that key's path otherwise than it was signed.
    func forEach<Element: Sendable, Value: Sendable>(
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
