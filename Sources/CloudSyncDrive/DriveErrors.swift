import CloudSync
import CloudSyncHTTP
import Foundation

/// The error fields of a Drive answer: `{"error":{"code","message","errors":[{"reason",...}],"status"}}`.
package struct DriveErrorBody: Sendable, Equatable {
    /// The first error item's `reason` (`storageQuotaExceeded`, `notFound`, ...); empty when there is none.
    package var reason: String
    /// The top-level `message`, or the item's.
    package var message: String
    /// The item's `location` (`pageToken`, `Authorization`), if any.
    package var location: String?

    /// The fields of `body`; empty when it is not Drive's error shape.
    package init(_ body: Data) {
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        let error = object?["error"] as? [String: Any]
        let item = (error?["errors"] as? [[String: Any]])?.first
        reason = item?["reason"] as? String ?? ""
        message = error?["message"] as? String ?? item?["message"] as? String ?? ""
        location = item?["location"] as? String
    }

    /// Whether Drive asked for fewer requests (403 `userRateLimitExceeded` or `rateLimitExceeded`, 429).
    package var isRateLimit: Bool { ["userRateLimitExceeded", "rateLimitExceeded"].contains(reason) }
}

/// Drive's answers as the store's codes (docs/provider-google-drive.md; api-facts A.8).
package enum DriveErrorMapping {
    /// How Drive names its errors: the first error item's `reason` and the `message` of its JSON body; the status
    /// Drive sent even where a 403 rate limit was turned into a 429 below the retry layer.
    package static let serviceErrors = ServiceErrorReader(
        originalStatusHeader: DriveRateLimitTransport.originalStatusHeader
    ) { response in
        let body = DriveErrorBody(response.body)
        return (body.reason.isEmpty ? nil : body.reason, body.message.isEmpty ? nil : body.message)
    }

    /// The error for a non-success `response` to `request`; `key` is the store key concerned, if one is.
    ///
    /// Its context holds the status Drive sent, its reason and its message.
    package static func error(for response: HTTPResponse, to request: HTTPRequest, key: String? = nil)
        -> CloudSyncError
    {
        serviceErrors.attaching(to: coded(for: response, to: request, key: key), of: response, to: request)
    }

    private static func coded(for response: HTTPResponse, to request: HTTPRequest, key: String?) -> CloudSyncError {
        let body = DriveErrorBody(response.body)
        let status =
            response.headers[DriveRateLimitTransport.originalStatusHeader].flatMap { Int($0) }
            ?? response.status
        let said =
            "\(request.method) \(HTTPRedaction.redactedPath(request.url)) answered HTTP \(status)"
            + (body.reason.isEmpty ? "" : " \(body.reason)")
            + (body.message.isEmpty ? "" : ": \(HTTPRedaction.excerpt(of: Data(body.message.utf8), request: request))")
        switch (status, body.reason) {
        case (401, _):
            return CloudSyncError(
                .notSignedIn, "\(said); the Google account's access was refused: run `cloudsync login` again",
                key: key)
        case (429, _), (403, "userRateLimitExceeded"), (403, "rateLimitExceeded"), (403, "dailyLimitExceeded"):
            return CloudSyncError(.rateLimited, "\(said); Drive asked for fewer requests, try again later", key: key)
        case (403, "storageQuotaExceeded"), (403, "quotaExceeded"):
            return CloudSyncError(
                .quotaExceeded,
                "\(said); the Google account's storage is full: free space in Drive (or Gmail and Photos, which "
                    + "share it) or buy more",
                key: key)
        case (403, "insufficientPermissions"), (403, "insufficientScopes"):
            return CloudSyncError(
                .notSignedIn,
                "\(said); the token lacks the drive.appdata scope: run `cloudsync login` again to grant it", key: key)
        case (403, "appNotAuthorizedToFile"), (403, "insufficientFilePermissions"), (403, "domainPolicy"),
            (403, "accessNotConfigured"):
            return CloudSyncError(
                .containerMisconfigured,
                "\(said); the OAuth client may not use Drive here: enable the Drive API for the client's project "
                    + "and check the Workspace policy",
                key: key)
        case (500..<600, _):
            return CloudSyncError(.server, "\(said); Drive failed on its side, try again later", key: key)
        default:
            return CloudSyncError(.provider, said, key: key)
        }
    }

    /// Whether `error` concerns the account or the connection rather than one file, so a batch fails as a whole.
    static func isBatchWide(_ error: CloudSyncError) -> Bool {
        [.notSignedIn, .containerMisconfigured, .offline, .cancelled, .closed].contains(error.code)
    }
}

/// Turns Drive's 403 rate-limit answers into 429s below the retry layer, which retries by status.
///
/// Google's own client retries 403 `userRateLimitExceeded` and `rateLimitExceeded` as it does 429. The original status
/// travels in ``originalStatusHeader`` so messages still say 403.
package struct DriveRateLimitTransport: HTTPTransport {
    /// Carries the status Drive sent when this layer changed it.
    package static let originalStatusHeader = "X-CloudSync-Drive-Status"

    /// The transport below.
    package let next: any HTTPTransport

    /// Over `next`.
    package init(next: any HTTPTransport) { self.next = next }

    package func close() { next.close() }

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var response = try await next.send(request)
        if response.status == 403, DriveErrorBody(response.body).isRateLimit {
            response.headers[Self.originalStatusHeader] = "403"
            response.status = 429
        }
        return response
    }
}

/// A fixed bearer token (the pipeline's `accessToken`): nothing to refresh when it is refused.
struct StaticBearerToken: HTTPAuthenticator {
    let token: String
    let signInAdvice: String? =
        "give a new `accessToken`, or a `refreshToken` with its client, or sign in with `cloudsync login`"

    func authorize(_ request: inout HTTPRequest) async throws {
        request.headers["Authorization"] = "Bearer \(token)"
    }

    func refresh(after response: HTTPResponse) async throws -> Bool { false }
}
