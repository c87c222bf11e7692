/// What a service said when it refused a request, as fields beside the message people read: code branches on
/// these, never on a message's text.
///
/// Reports carry ``serviceCode`` beside the store's own code; nothing here holds a value or a secret.
public struct ErrorContext: Sendable, Equatable, Codable {
    /// The HTTP status of the answer; nil when no answer came (offline, timed out).
    public var httpStatus: Int?
    /// The service's own error code: S3's `SlowDown` or `NoSuchBucket`, Drive's `rateLimitExceeded` or
    /// `storageQuotaExceeded`, CloudKit's `QUOTA_EXCEEDED`.
    public var serviceCode: String?
    /// The service's own words for it, shortened and with credentials struck.
    public var serviceReason: String?
    /// The id the service gave the request (S3's `x-amz-request-id`, CloudKit's `uuid`), for its support.
    public var requestID: String?

    /// A context; every field is optional.
    public init(
        httpStatus: Int? = nil, serviceCode: String? = nil, serviceReason: String? = nil, requestID: String? = nil
    ) {
        self.httpStatus = httpStatus
        self.serviceCode = serviceCode
        self.serviceReason = serviceReason
        self.requestID = requestID
    }
}
