import CloudSync
import CloudSyncHTTP
import CloudSyncSodium
import Foundation

/// Where a bucket is and how it is addressed.
public struct S3Location: Sendable, Equatable, CustomStringConvertible {
    /// The service's base URL (`https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`), without a trailing `/`.
    public var endpoint: URL
    /// The bucket.
    public var bucket: String
    /// The region requests are signed for (`us-east-1`; R2 uses `auto`).
    public var region: String
    /// `endpoint/bucket/key` when true; `bucket.endpoint/key` (virtual-hosted, the AWS default) when false.
    public var pathStyle: Bool

    /// A location; `endpoint` loses any trailing `/`.
    public init(endpoint: URL, bucket: String, region: String, pathStyle: Bool) {
        var text = endpoint.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        self.endpoint = URL(string: text) ?? endpoint
        self.bucket = bucket
        self.region = region
        self.pathStyle = pathStyle
    }

    /// AWS's endpoint of `region`.
    public static func awsEndpoint(region: String) -> URL { URL(string: "https://s3.\(region).amazonaws.com")! }

    /// `s3://bucket at endpoint`.
    public var description: String { "s3://\(bucket) at \(endpoint.absoluteString)" }

    /// The URL of `objectKey` (the full key, prefix included), with `query` already encoded.
    public func url(objectKey: String, query: String? = nil) -> URL {
        url(path: "/" + S3URIEncoding.path(objectKey), query: query)
    }

    /// The bucket's URL with `query` already encoded (`list-type=2&...`, `delete`).
    public func bucketURL(query: String) -> URL { url(path: pathStyle ? "" : "/", query: query) }

    private func url(path: String, query: String?) -> URL {
        var base = endpoint.absoluteString
        if pathStyle {
            base += "/" + S3URIEncoding.encode(bucket)
        } else if var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false) {
            components.host = bucket + "." + (components.host ?? "")
            base = components.string ?? base
        }
        return URL(string: base + path + (query.map { "?" + $0 } ?? ""))!
    }
}

/// Signs every request with SigV4 at the clock's time: the body's SHA-256 as `x-amz-content-sha256`.
struct S3Authenticator: HTTPAuthenticator {
    let credentials: S3Credentials
    let region: String
    let clock: any StoreClock

    func authorize(_ request: inout HTTPRequest) async throws {
        // A body streamed from a file is not hashed (it would be read twice), and neither is a part of a file's
        // transfer that carries `Content-MD5`: the signed MD5 already binds its bytes, and hashing megabytes twice
        // cost a fifth of a multipart upload's time.
        let unhashed =
            request.uploadFile != nil || (request.transferBytes != nil && request.headers["Content-MD5"] != nil)
        let payloadHash = unhashed ? SigV4.unsignedPayload : Hex.encode(SHA256.hash(request.body))
        let signature = SigV4.sign(
            method: request.method.rawValue, url: request.url, headers: request.headers, payloadHash: payloadHash,
            credentials: credentials, region: region, timeMilliseconds: clock.nowMilliseconds())
        for field in signature.headers { request.headers[field.name] = field.value }
    }

    /// S3 keys do not refresh; a refused key stays refused.
    func refresh(after response: HTTPResponse) async throws -> Bool { false }
}

/// An S3 error answer's fields: `<Error><Code/><Message/>...</Error>`.
package struct S3ErrorBody: Sendable, Equatable {
    /// `NoSuchKey`, `SlowDown`, ...; empty when the answer had no XML error (a `HEAD`, a proxy's page).
    package var code: String
    /// The server's sentence.
    package var message: String
    /// `RequestTimeTooSkewed`'s request time (`20130524T000000Z`) and server time (`2013-05-24T00:20:00Z`).
    package var requestTime: String?
    /// See ``requestTime``.
    package var serverTime: String?

    /// The error fields of `body`; an empty code when it holds none.
    package init(_ body: Data) {
        let root = XMLElement.parse(body)
        let error = root?.name == "Error" ? root : nil
        code = error?.text(of: "Code") ?? ""
        message = error?.text(of: "Message") ?? ""
        requestTime = error?.text(of: "RequestTime")
        serverTime = error?.text(of: "ServerTime")
    }
}

/// S3's error answers as the store's codes (docs/provider-s3.md).
package enum S3ErrorMapping {
    /// How S3 names its errors: `<Code>` and `<Message>` of the XML body, the request id in `x-amz-request-id`.
    package static let serviceErrors = ServiceErrorReader(requestIDHeader: "x-amz-request-id") { response in
        let body = S3ErrorBody(response.body)
        return (body.code.isEmpty ? nil : body.code, body.message.isEmpty ? nil : body.message)
    }

    /// The error for a non-success `response` to `request`, for the bucket at `location` signed with `accessKeyID`.
    ///
    /// `key` is the store key concerned, if one is. Its context holds the status, S3's code and message and the
    /// request id.
    package static func error(
        for response: HTTPResponse, to request: HTTPRequest, location: S3Location, accessKeyID: String,
        key: String? = nil
    ) -> CloudSyncError {
        serviceErrors.attaching(
            to: coded(for: response, to: request, location: location, accessKeyID: accessKeyID, key: key),
            of: response, to: request)
    }

    private static func coded(
        for response: HTTPResponse, to request: HTTPRequest, location: S3Location, accessKeyID: String,
        key: String?
    ) -> CloudSyncError {
        let body = S3ErrorBody(response.body)
        let said = body.code.isEmpty ? "HTTP \(response.status)" : "\(body.code), HTTP \(response.status)"
        let bucket = "the bucket \(location.bucket) at \(location.endpoint.absoluteString)"
        switch body.code {
        case "NoSuchBucket":
            return CloudSyncError(
                .containerMisconfigured,
                "\(bucket) does not exist (\(said)); create it, or fix the provider's `bucket`, `endpoint` or `region`",
                key: key)
        case "AccessDenied", "AllAccessDisabled", "AccountProblem":
            return CloudSyncError(
                .containerMisconfigured,
                "access key \(accessKeyID) may not use \(bucket) (\(said)); grant it s3:GetObject, s3:PutObject, "
                    + "s3:DeleteObject and s3:ListBucket there, or point the provider at a bucket it may use",
                key: key)
        case "InvalidAccessKeyId":
            return CloudSyncError(
                .notSignedIn,
                "the server at \(location.endpoint.absoluteString) does not know access key \(accessKeyID) (\(said)); "
                    + "likely a key of another account or endpoint, or a deleted one: fix the credentials",
                key: key)
        case "SignatureDoesNotMatch":
            return CloudSyncError(
                .notSignedIn,
                "the server refused the signature of access key \(accessKeyID) (\(said)); likely a wrong or rotated "
                    + "secret access key, or a region other than the bucket's (signed for \(location.region)): fix "
                    + "the secret or `region`",
                key: key)
        case "ExpiredToken", "InvalidToken", "TokenRefreshRequired":
            return CloudSyncError(
                .notSignedIn,
                "the session token of access key \(accessKeyID) was refused (\(said)); temporary credentials expire: "
                    + "get new ones",
                key: key)
        case "RequestTimeTooSkewed":
            return CloudSyncError(.notSignedIn, skewMessage(body, said: said), key: key)
        case "EntityTooLarge":
            return CloudSyncError(
                .payloadTooLarge,
                "\(bucket) refused the value as too large (\(said)); set a smaller `maxValueBytes` on the provider",
                key: key)
        case "SlowDown":
            return CloudSyncError(
                .rateLimited, "\(bucket) asked for fewer requests (\(said)); try again later", key: key)
        case "QuotaExceeded", "XMinioAdminBucketQuotaExceeded", "XMinioStorageFull":
            return CloudSyncError(
                .quotaExceeded, "\(bucket) is full (\(said)); free space or raise its quota", key: key)
        default:
            let mapped = HTTPErrorMapping.error(for: response, to: request)
            return CloudSyncError(mapped.code, mapped.message, key: key, retryAfterMs: mapped.retryAfterMs)
        }
    }

    /// The clock difference `RequestTimeTooSkewed` reports, in words.
    static func skewMessage(_ body: S3ErrorBody, said: String) -> String {
        let advice = "; set this machine's clock right (NTP: `timedatectl set-ntp true`) and try again"
        guard let request = body.requestTime.flatMap(parseTime), let server = body.serverTime.flatMap(parseTime) else {
            return "the server refused the request because this machine's clock differs too much from its own (\(said))"
                + advice
        }
        let seconds = request - server
        let direction = seconds >= 0 ? "ahead of" : "behind"
        return "this machine's clock is \(abs(seconds)) s \(direction) the server's (\(said): request time "
            + "\(body.requestTime!), server time \(body.serverTime!); S3 allows 15 minutes)" + advice
    }

    /// Seconds since 1970 of `20130524T000000Z` or `2013-05-24T00:20:00Z` (fractions ignored).
    static func parseTime(_ text: String) -> Int64? {
        let digits = Array(text.prefix { $0 != "." && $0 != "Z" }.filter(\.isNumber))
        guard digits.count == 14 else { return nil }
        func number(_ start: Int, _ length: Int) -> Int64 { Int64(String(digits[start..<start + length]))! }
        let year = number(0, 4)
        let month = number(4, 2)
        let day = number(6, 2)
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = number(8, 2) * 3600 + number(10, 2) * 60 + number(12, 2)
        return days * 86_400 + seconds
    }

    /// Whether `error` concerns the bucket, the credentials or the connection rather than one object, so a batch
    /// fails as a whole instead of key by key.
    static func isBatchWide(_ error: CloudSyncError) -> Bool {
        [.notSignedIn, .containerMisconfigured, .offline, .cancelled, .closed].contains(error.code)
    }
}

/// The HTTP conversation with one bucket: requests built, signed by the client's auth layer, and answers mapped.
struct S3Client: Sendable {
    let http: HTTPClient
    let location: S3Location
    let accessKeyID: String

    /// Sends `request`; a failure the layers gave up on comes back with S3's meaning (a `SlowDown` the retries could
    /// not outlast is `ERR_RATE_LIMITED`, not a server failure).
    func send(_ request: HTTPRequest, key: String? = nil) async throws(CloudSyncError) -> HTTPResponse {
        do {
            return try await http.send(request)
        } catch {
            if error.code == .server, error.context?.serviceCode == "SlowDown" {
                throw error.restated(
                    .rateLimited,
                    "the bucket \(location.bucket) kept asking for fewer requests (SlowDown, HTTP 503) after the "
                        + "retries; try again later"
                ).attributed(key: key)
            }
            throw error.attributed(key: key)
        }
    }

    /// The mapped error of a non-success answer.
    func failure(_ response: HTTPResponse, _ request: HTTPRequest, key: String? = nil) -> CloudSyncError {
        S3ErrorMapping.error(for: response, to: request, location: location, accessKeyID: accessKeyID, key: key)
            .attributed(provider: http.providerID)
    }

    /// Sends `request` and throws the mapped error for an answer that is not 2xx.
    func sendExpectingSuccess(_ request: HTTPRequest, key: String? = nil) async throws(CloudSyncError)
        -> HTTPResponse
    {
        let response = try await send(request, key: key)
        guard response.isSuccess else { throw failure(response, request, key: key) }
        return response
    }
}
