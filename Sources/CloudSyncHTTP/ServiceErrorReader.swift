import CloudSync
import Foundation

/// How one service names its errors in an answer.
///
/// Its own code and reason are in the body, and a header carries the request's id; ``HTTPErrorMapping`` puts what
/// it reads into the error's `ErrorContext`.
public struct ServiceErrorReader: Sendable {
    /// The header holding the service's id for the request (`x-amz-request-id`); nil when it gives none.
    public let requestIDHeader: String?
    /// The header a layer below the retries sets when it changed the status (Drive's 403 rate limits become 429s),
    /// holding the status the service sent.
    public let originalStatusHeader: String?
    private let read: @Sendable (HTTPResponse) -> (code: String?, reason: String?)

    /// A reader taking the request id from `requestIDHeader` and the code and reason from the answer with `read`.
    public init(
        requestIDHeader: String? = nil, originalStatusHeader: String? = nil,
        _ read: @escaping @Sendable (HTTPResponse) -> (code: String?, reason: String?)
    ) {
        self.requestIDHeader = requestIDHeader
        self.originalStatusHeader = originalStatusHeader
        self.read = read
    }

    /// A service whose answers name no code of their own: the context holds the status alone.
    public static let none = ServiceErrorReader { _ in (nil, nil) }

    /// The context of a non-success answer to `request`: its status, and what the service said (its reason
    /// shortened and with the request's credentials struck).
    public func context(of response: HTTPResponse, to request: HTTPRequest) -> ErrorContext {
        let (code, reason) = read(response)
        let status = originalStatusHeader.flatMap { response.headers[$0] }.flatMap { Int($0) } ?? response.status
        return ErrorContext(
            httpStatus: status, serviceCode: code,
            serviceReason: reason.map { HTTPRedaction.excerpt(of: Data($0.utf8), request: request) },
            requestID: requestIDHeader.flatMap { response.headers[$0] })
    }

    /// `error`, the store's reading of a non-success `response` to `request`, with the context the service gave.
    public func attaching(to error: CloudSyncError, of response: HTTPResponse, to request: HTTPRequest)
        -> CloudSyncError
    {
        var error = error
        error.context = context(of: response, to: request)
        return error
    }
}
