import CloudSync
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns HTTP answers and transport failures into the store's error codes, in one place.
public enum HTTPErrorMapping {
    /// The code a non-success `status` maps to; nil for 2xx and 3xx.
    ///
    /// 401 maps to `ERR_NOT_SIGNED_IN` only here, for callers without an auth layer; with one, a 401 reaches this
    /// only after a refresh did not help.
    public static func code(forStatus status: Int) -> ErrorCode? {
        switch status {
        case 200..<400: return nil
        case 401: return .notSignedIn
        case 429: return .rateLimited
        case 507: return .quotaExceeded
        case 500..<600: return .server
        default: return .provider
        }
    }

    /// The error for a non-success `response` to `request`.
    ///
    /// Its message holds the code, the method and redacted path, the status, and a sanitized excerpt of the server's
    /// reason; `retryAfterMs` when the answer asked for a wait. Its context holds the status and what
    /// `serviceErrors` reads from the answer (the service's own code, reason and request id).
    public static func error(
        for response: HTTPResponse, to request: HTTPRequest, retryAfterMs: Int? = nil, code: ErrorCode? = nil,
        serviceErrors: ServiceErrorReader = .none
    ) -> CloudSyncError {
        let code = code ?? self.code(forStatus: response.status) ?? .provider
        let reason = HTTPRedaction.excerpt(of: response.body, request: request)
        let what = "\(request.method) \(HTTPRedaction.redactedPath(request.url)) answered HTTP \(response.status)"
        let said = reason.isEmpty ? "" : ": \(reason)"
        let advice: String
        switch code {
        case .rateLimited: advice = "; the provider asked for fewer requests, try again later"
        case .server: advice = "; the provider failed on its side, try again later"
        case .notSignedIn: advice = "; sign in to the provider again"
        case .quotaExceeded: advice = "; free space at the provider"
        default: advice = ""
        }
        return CloudSyncError(
            code, what + said + advice, retryAfterMs: retryAfterMs,
            context: serviceErrors.context(of: response, to: request))
    }

    /// Whether `error` is a network failure worth trying again: the connection broke, could not be made, the name
    /// did not resolve, or the transport timed out while idle.
    public static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? URLError else { return false }
        switch error.code {
        case .networkConnectionLost, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .timedOut,
            .notConnectedToInternet, .secureConnectionFailed:
            return true
        default:
            // ECONNRESET arrives as a generic URLError from libcurl's "recv failure".
            return error.code.rawValue == NSURLErrorNetworkConnectionLost
        }
    }

    /// Any error a layer or transport threw while sending `request`, as a `CloudSyncError`.
    ///
    /// Offline (refused, no route, DNS, not connected) is `ERR_OFFLINE`; the transport's idle timeout
    /// `ERR_TIMEOUT`; cancellation `ERR_CANCELLED`; everything else `ERR_PROVIDER`.
    public static func error(for error: any Error, sending request: HTTPRequest) -> CloudSyncError {
        if let error = error as? CloudSyncError { return error }
        let target = "\(request.method) \(HTTPRedaction.redactedPath(request.url))"
        if error is CancellationError {
            return CloudSyncError(.cancelled, "\(target) was cancelled")
        }
        guard let urlError = error as? URLError else {
            return CloudSyncError(.provider, "\(target) failed: \(type(of: error))")
        }
        // Connection failures concern the host, not the object: their messages name the host alone, so when a batch
        // fails as a whole each of its keys can carry the message without naming another key's request.
        let host = hostAndPort(request.url)
        switch urlError.code {
        case .cancelled:
            return CloudSyncError(.cancelled, "\(target) was cancelled")
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet,
            .networkConnectionLost, .internationalRoamingOff, .dataNotAllowed:
            return CloudSyncError(
                .offline,
                "could not reach \(host) (URLError \(urlError.code.rawValue)); check the network and try again")
        case .timedOut:
            return CloudSyncError(.timeout, "\(host) sent nothing for too long")
        case .userAuthenticationRequired:
            return CloudSyncError(.notSignedIn, "\(host) wants credentials; sign in again")
        default:
            let reason = transportReason(urlError, request: request)
            var message = "\(target) failed with URLError \(urlError.code.rawValue)"
            if let reason { message += ": \(reason)" }
            // libcurl's certificate failures arrive as URLError -1 (unknown) through FoundationNetworking.
            if (reason ?? "").lowercased().contains("certificate") || (-1206 ... -1200).contains(urlError.code.rawValue)
            {
                message +=
                    "; if the server's certificate comes from a private certificate authority, add that authority to "
                    + "the system's trust store (update-ca-certificates on Debian; SSL_CERT_FILE is not read)"
            }
            return CloudSyncError(.provider, message)
        }
    }

    /// `host:port` of `url` (the port only when the URL names one); `the provider` when it names no host.
    static func hostAndPort(_ url: URL) -> String {
        guard let host = url.host else { return "the provider" }
        return url.port.map { "\(host):\($0)" } ?? host
    }

    /// What the transport said went wrong (libcurl's error text, which FoundationNetworking puts in the localized
    /// description), printable, short, and with the request's credentials and URL struck; nil when it said nothing.
    static func transportReason(_ error: URLError, request: HTTPRequest) -> String? {
        guard let text = error.userInfo[NSLocalizedDescriptionKey] as? String else { return nil }
        let excerpt = HTTPRedaction.excerpt(of: Data(text.utf8), request: request, limit: 160)
        let struck = excerpt.replacingOccurrences(
            of: request.url.absoluteString, with: HTTPRedaction.redact(request.url))
        return struck.isEmpty ? nil : struck
    }

    /// The error when an operation's deadline passed.
    public static func timeout(_ request: HTTPRequest, after timeout: Duration?) -> CloudSyncError {
        let limit = timeout.map { " within \($0.milliseconds) ms" } ?? ""
        return CloudSyncError(
            .timeout, "\(request.method) \(HTTPRedaction.redactedPath(request.url)) did not finish\(limit)")
    }
}
