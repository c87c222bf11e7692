import CloudSync
import CloudSyncHTTP
import Foundation

/// An OAuth 2.0 client as a provider (Google) registered it, and the provider's endpoints.
public struct OAuthClientConfiguration: Sendable, Equatable {
    /// The client id (`….apps.googleusercontent.com`).
    public var clientID: String
    /// The client secret (nil for a public client): Google issues one to installed apps too and wants it at the token
    /// endpoint.
    public var clientSecret: String?
    /// Where the person approves access (`https://accounts.google.com/o/oauth2/v2/auth`).
    public var authorizationEndpoint: URL
    /// Where codes and refresh tokens become access tokens (`https://oauth2.googleapis.com/token`).
    public var tokenEndpoint: URL
    /// The scopes asked for (`https://www.googleapis.com/auth/drive.appdata`).
    public var scopes: [String]

    /// A client; see the properties.
    public init(
        clientID: String, clientSecret: String?, authorizationEndpoint: URL, tokenEndpoint: URL, scopes: [String]
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.scopes = scopes
    }
}

/// What a token endpoint granted (RFC 6749 §5.1).
public struct OAuthTokens: Sendable, Equatable {
    /// The bearer token for API requests.
    public var accessToken: String
    /// Seconds until the access token expires, when the server said.
    public var expiresIn: Int?
    /// A refresh token: sent with the first grant of a code; a refresh normally returns none (keep the old one).
    public var refreshToken: String?
    /// The scopes granted, space-separated.
    public var scope: String?
    /// `Bearer`.
    public var tokenType: String

    /// Tokens as granted.
    public init(
        accessToken: String, expiresIn: Int? = nil, refreshToken: String? = nil, scope: String? = nil,
        tokenType: String = "Bearer"
    ) {
        self.accessToken = accessToken
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.scope = scope
        self.tokenType = tokenType
    }
}

/// Talks to an OAuth 2.0 token endpoint: exchanges an authorization code (with its PKCE verifier) and refreshes
/// access tokens, mapping the endpoint's error bodies to the store's codes.
///
/// `invalid_grant` (a revoked or expired refresh token, a used code, a wrong verifier) is `ERR_NOT_SIGNED_IN`;
/// `invalid_client` is `ERR_CONTAINER_MISCONFIGURED` (check the client id and secret). No message carries a token,
/// a code, a verifier or the client secret.
public struct OAuthTokenClient: Sendable {
    /// The client and its endpoints.
    public let configuration: OAuthClientConfiguration
    private let stack: any HTTPTransport

    /// A client sending over `transport` (URLSession by default), each call within `timeout` on `clock`, retried on
    /// 429, 5xx and network failures: even a code exchange, since a retry can at worst be refused as a used code,
    /// which is where not retrying would end too.
    public init(
        configuration: OAuthClientConfiguration, transport: any HTTPTransport = URLSessionTransport(),
        clock: any StoreClock = SystemClock(), timeout: Duration = .seconds(30)
    ) {
        self.configuration = configuration
        let retried = RetryLayer(next: transport, policy: RetryPolicy(maxAttempts: 3), clock: clock)
        stack = DeadlineLayer(next: retried, clock: clock, timeout: timeout)
    }

    /// Exchanges an authorization code for tokens (`grant_type=authorization_code`, RFC 6749 §4.1.3 and RFC 7636
    /// §4.5); `redirectURI` must be the one the authorization request named.
    public func exchange(code: String, verifier: String, redirectURI: String) async throws(CloudSyncError)
        -> OAuthTokens
    {
        try await post(
            [
                ("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier),
                ("redirect_uri", redirectURI),
            ], what: "the authorization code", retrySafe: true)
    }

    /// A new access token for `refreshToken` (`grant_type=refresh_token`, RFC 6749 §6).
    public func refresh(_ refreshToken: String) async throws(CloudSyncError) -> OAuthTokens {
        try await post(
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], what: "the refresh token",
            retrySafe: true)
    }

    private func post(_ fields: [(String, String)], what: String, retrySafe: Bool) async throws(CloudSyncError)
        -> OAuthTokens
    {
        var form = [("client_id", configuration.clientID)]
        if let secret = configuration.clientSecret { form.append(("client_secret", secret)) }
        form += fields
        let request = HTTPRequest(
            method: .post, url: configuration.tokenEndpoint,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(formURLEncoded(form).utf8), isRetrySafe: retrySafe)
        let secrets = form.filter { $0.0 != "grant_type" && $0.0 != "client_id" && $0.0 != "redirect_uri" }.map(\.1)
        let response: HTTPResponse
        do {
            response = try await stack.send(request)
        } catch {
            throw HTTPErrorMapping.error(for: error, sending: request)
        }
        let endpoint = "the token endpoint \(HTTPRedaction.redact(configuration.tokenEndpoint))"
        guard response.isSuccess else {
            throw Self.error(for: response, to: request, endpoint: endpoint, what: what, secrets: secrets)
        }
        guard let body = try? JSONDecoder.snakeCase.decode(TokenBody.self, from: response.body),
            let accessToken = body.accessToken, !accessToken.isEmpty
        else {
            throw CloudSyncError(.provider, "\(endpoint) answered HTTP \(response.status) without an access_token")
        }
        return OAuthTokens(
            accessToken: accessToken, expiresIn: body.expiresIn, refreshToken: body.refreshToken, scope: body.scope,
            tokenType: body.tokenType ?? "Bearer")
    }

    /// The error for a refusal: RFC 6749 §5.2 `error` and `error_description`, struck of every secret sent.
    static func error(
        for response: HTTPResponse, to request: HTTPRequest, endpoint: String, what: String, secrets: [String]
    ) -> CloudSyncError {
        guard let body = try? JSONDecoder.snakeCase.decode(ErrorBody.self, from: response.body), let code = body.error
        else {
            return HTTPErrorMapping.error(for: response, to: request)
        }
        let said = HTTPRedaction.strike(
            secrets, from: body.errorDescription.map { "\(code): \($0)" } ?? code)
        switch code {
        case "invalid_grant":
            return CloudSyncError(.notSignedIn, "\(endpoint) refused \(what) (\(said)); sign in again")
        case "invalid_client", "unauthorized_client":
            return CloudSyncError(
                .containerMisconfigured,
                "\(endpoint) refused the OAuth client (\(said)); check the client id and secret")
        default:
            if let mapped = HTTPErrorMapping.code(forStatus: response.status),
                mapped == .server || mapped == .rateLimited
            {
                return CloudSyncError(mapped, "\(endpoint) answered HTTP \(response.status) (\(said))")
            }
            return CloudSyncError(.provider, "\(endpoint) refused the request (\(said))")
        }
    }

    /// RFC 6749 §5.1's fields (snake case on the wire).
    private struct TokenBody: Decodable {
        let accessToken: String?
        let expiresIn: Int?
        let refreshToken: String?
        let scope: String?
        let tokenType: String?
    }

    /// RFC 6749 §5.2's fields (snake case on the wire).
    private struct ErrorBody: Decodable {
        let error: String?
        let errorDescription: String?
    }
}

extension JSONDecoder {
    /// A decoder for OAuth's snake-case fields.
    static var snakeCase: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }
}

/// `application/x-www-form-urlencoded` text of `fields`: every byte but the unreserved ones percent-encoded.
public func formURLEncoded(_ fields: [(String, String)]) -> String {
    fields.map { "\(formEscaped($0.0))=\(formEscaped($0.1))" }.joined(separator: "&")
}

/// RFC 3986's unreserved characters, the only ones a form field keeps as they are.
private let unreserved = CharacterSet(
    charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

private func formEscaped(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
}
