import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// Google's OAuth 2.0 endpoints for installed apps, with an approval that needs no person: the authorization
/// endpoint (`GET /o/oauth2/v2/auth`), the token endpoint (`POST /token`) and revocation (`POST /revoke`), plus
/// ``authorize(_:scope:)`` for a data API to check bearer tokens.
///
/// Faithful where a client can tell (RFC 6749, RFC 7636, Google's answers):
/// - An unknown `client_id` or a `redirect_uri` that is not `http` on `127.0.0.1`, `localhost` or `[::1]` gets an
///   error page and no redirect (RFC 6749 §4.1.2.1); so does any other malformed request, as Google shows pages
///   for them. Stricter than Google on purpose: PKCE with `S256` and a `state` are required, so a client that
///   forgets either fails here.
/// - Approval redirects `302` to `redirect_uri?code=…&scope=…&state=…` at once, as the user given by `login_hint`
///   (default ``Configuration/defaultUser``); with ``Configuration/approves`` false it redirects with
///   `error=access_denied`, as a person declining would.
/// - The token endpoint takes `client_secret` in the form or HTTP Basic; codes are single use, bound to the client,
///   the redirect URI and the PKCE challenge, and expire; errors are Google's bodies (`invalid_grant` with "Invalid
///   code verifier." or "Token has been expired or revoked.", 401 `invalid_client`, `redirect_uri_mismatch`, ...).
/// - Access tokens (`ya29.…`) expire after ``Configuration/accessTokenLifetime`` on the injected clock; a refresh
///   grant issues a new one and no new refresh token; refresh tokens (`1//…`) last until revoked.
public final class GoogleOAuthEmulator: Sendable {
    /// An OAuth client registered with the emulator, as one is in Google Cloud Console.
    public struct Client: Sendable, Codable, Equatable {
        /// The client id.
        public var id: String
        /// The client secret; nil for a public client (none is asked for).
        public var secret: String?

        /// A client.
        public init(id: String, secret: String?) {
            self.id = id
            self.secret = secret
        }

        /// The client `cloudsync-emulator` registers and prints; its secret is a test value, not a secret.
        public static let emulatorDefault = Client(
            id: "cloudsync-emulator.apps.googleusercontent.com", secret: "cloudsync-emulator-client-secret")
    }

    /// How the emulator behaves.
    public struct Configuration: Sendable {
        /// The registered clients.
        public var clients: [Client] = [.emulatorDefault]
        /// How long an access token works (Google: 3599 s).
        public var accessTokenLifetime: Duration = .seconds(3599)
        /// How long an authorization code can be exchanged.
        public var codeLifetime: Duration = .seconds(600)
        /// Who approves when the request names no `login_hint`.
        public var defaultUser = "user@example.com"
        /// Whether the emulated person approves (false: `error=access_denied`).
        public var approves = true

        /// The defaults.
        public init() {}
    }

    /// What a valid bearer token grants.
    public struct Grant: Sendable, Equatable {
        /// The client the token was issued to.
        public let clientID: String
        /// The user who approved (an email address).
        public let user: String
        /// The scopes granted.
        public let scopes: [String]
    }

    /// The outcome of checking a request's bearer token.
    public enum BearerCheck: Sendable {
        /// The token is valid.
        case granted(Grant)
        /// It is missing, unknown, expired or lacks the scope: answer this (Google's 401 or 403 body).
        case refused(HTTPResponse)
    }

    /// What the emulator keeps across restarts: issued codes and tokens.
    public struct SavedState: Sendable, Codable, Equatable {
        struct Code: Sendable, Codable, Equatable {
            var clientID: String
            var redirectURI: String
            var challenge: String
            var scope: String
            var user: String
            var expiresAtMs: Int64
        }

        struct RefreshToken: Sendable, Codable, Equatable {
            var clientID: String
            var user: String
            var scope: String
            var revoked: Bool
        }

        struct AccessToken: Sendable, Codable, Equatable {
            var clientID: String
            var user: String
            var scope: String
            var expiresAtMs: Int64
            var refreshToken: String?
        }

        var codes: [String: Code] = [:]
        var refreshTokens: [String: RefreshToken] = [:]
        var accessTokens: [String: AccessToken] = [:]

        /// Nothing issued yet.
        public init() {}
    }

    /// The authorization endpoint's path, as Google's (`https://accounts.google.com/o/oauth2/v2/auth`).
    public static let authorizationPath = "/o/oauth2/v2/auth"
    /// The token endpoint's path, as Google's (`https://oauth2.googleapis.com/token`).
    public static let tokenPath = "/token"
    /// The revocation endpoint's path, as Google's (`https://oauth2.googleapis.com/revoke`).
    public static let revokePath = "/revoke"

    let clock: any StoreClock
    let configuration: Mutex<Configuration>
    let state = Mutex(SavedState())

    /// An emulator with `configuration`, its tokens expiring on `clock`.
    public init(configuration: Configuration = Configuration(), clock: any StoreClock = SystemClock()) {
        self.clock = clock
        self.configuration = Mutex(configuration)
    }

    /// Whether the emulated person approves from now on.
    public var approves: Bool {
        get { configuration.withLock { $0.approves } }
        set { configuration.withLock { $0.approves = newValue } }
    }

    /// The first registered client.
    public var defaultClient: Client? { configuration.withLock { $0.clients.first } }

    /// Adds the three endpoints to `server`.
    public func register(on server: LoopbackHTTPServer) {
        server.route(HTTPRoutePattern(stringLiteral: "GET " + Self.authorizationPath)) { [self] in approve($0) }
        server.route(HTTPRoutePattern(stringLiteral: "POST " + Self.tokenPath)) { [self] in token($0) }
        server.route(HTTPRoutePattern(stringLiteral: "POST " + Self.revokePath)) { [self] in revoke($0) }
    }

    /// The endpoints on `baseURL` and the default client, as pipeline fields name them.
    public func urls(baseURL: URL) -> [String: String] {
        let base = baseURL.absoluteString
        var urls = [
            "endpoint": base, "tokenEndpoint": base + Self.tokenPath, "authEndpoint": base + Self.authorizationPath,
            "revokeEndpoint": base + Self.revokePath,
        ]
        if let client = defaultClient {
            urls["clientId"] = client.id
            urls["clientSecret"] = client.secret
        }
        return urls
    }

    // MARK: State

    /// Every code and token issued, for saving.
    public var savedState: SavedState { state.withLock { $0 } }

    /// Replaces what was issued with `saved`.
    public func restore(_ saved: SavedState) { state.withLock { $0 = saved } }

    /// Whether `refreshToken` was issued and not revoked.
    public func isActive(refreshToken: String) -> Bool {
        state.withLock { $0.refreshTokens[refreshToken].map { !$0.revoked } ?? false }
    }

    /// Refresh tokens issued and not revoked.
    public var activeRefreshTokenCount: Int { state.withLock { $0.refreshTokens.values.filter { !$0.revoked }.count } }

    /// Revokes `token` (a refresh token, with every access token issued from it, or an access token); returns whether
    /// it was known.
    @discardableResult
    public func revoke(token: String) -> Bool {
        state.withLock { state in
            if var refresh = state.refreshTokens[token] {
                refresh.revoked = true
                state.refreshTokens[token] = refresh
                state.accessTokens = state.accessTokens.filter { $0.value.refreshToken != token }
                return true
            }
            return state.accessTokens.removeValue(forKey: token) != nil
        }
    }

    /// Issues a refresh token and an access token for `user` at once, as an approved sign-in would, for tests and
    /// examples that need a signed-in account without a browser.
    public func issueTokens(
        user: String, scope: String = "https://www.googleapis.com/auth/drive.appdata", clientID: String? = nil
    ) -> (refreshToken: String, accessToken: String) {
        let clientID = clientID ?? defaultClient?.id ?? Client.emulatorDefault.id
        let lifetime = configuration.withLock { $0.accessTokenLifetime }
        let refreshToken = randomToken("1//0g", bytes: 48)
        let accessToken = randomToken("ya29.a0", bytes: 48)
        let now = clock.nowMilliseconds()
        state.withLock { state in
            state.refreshTokens[refreshToken] = SavedState.RefreshToken(
                clientID: clientID, user: user, scope: scope, revoked: false)
            state.accessTokens[accessToken] = SavedState.AccessToken(
                clientID: clientID, user: user, scope: scope, expiresAtMs: now + lifetime.milliseconds,
                refreshToken: refreshToken)
        }
        return (refreshToken, accessToken)
    }

    // MARK: Bearer tokens

    /// Checks the request's `Authorization: Bearer` token (or `access_token` query parameter, which Google also
    /// takes), and that it grants `scope` when one is named.
    public func authorize(_ request: ReceivedRequest, scope: String? = nil) -> BearerCheck {
        var token = request.query("access_token")
        if let header = request.headers["Authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { token = String(parts[1]) }
        }
        guard let token, !token.isEmpty else {
            return .refused(
                Self.apiError(
                    401,
                    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
                        + "cookie or other valid authentication credential.", reason: "required",
                    detail: "Login Required.", status: "UNAUTHENTICATED", location: "Authorization"))
        }
        let now = clock.nowMilliseconds()
        guard let record = state.withLock({ $0.accessTokens[token] }), record.expiresAtMs > now else {
            var response = Self.apiError(
                401,
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                    + "other valid authentication credential.", reason: "authError", detail: "Invalid Credentials",
                status: "UNAUTHENTICATED", location: "Authorization")
            response.headers["WWW-Authenticate"] =
                "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\""
            return .refused(response)
        }
        let scopes = record.scope.split(separator: " ").map(String.init)
        if let scope, !scopes.contains(scope) {
            return .refused(
                Self.apiError(
                    403, "Request had insufficient authentication scopes.", reason: "insufficientPermissions",
                    detail: "Insufficient Permission", status: "PERMISSION_DENIED", location: nil))
        }
        return .granted(Grant(clientID: record.clientID, user: record.user, scopes: scopes))
    }

    /// Google's JSON error body for an API call.
    static func apiError(
        _ code: Int, _ message: String, reason: String, detail: String, status: String, location: String?
    ) -> HTTPResponse {
        struct Body: Encodable {
            struct Error: Encodable {
                struct Item: Encodable {
                    let message: String
                    let domain: String
                    let reason: String
                    let location: String?
                    let locationType: String?
                }
                let code: Int
                let message: String
                let errors: [Item]
                let status: String
            }
            let error: Error
        }
        return .json(
            Body(
                error: .init(
                    code: code, message: message,
                    errors: [
                        .init(
                            message: detail, domain: "global", reason: reason, location: location,
                            locationType: location == nil ? nil : "header")
                    ], status: status)), status: code)
    }

    // MARK: Token endpoint

    private func tokenError(_ status: Int, _ error: String, _ description: String) -> HTTPResponse {
        var response = HTTPResponse.json(["error": error, "error_description": description], status: status)
        response.headers["Cache-Control"] = "no-cache, no-store, max-age=0, must-revalidate"
        response.headers["Pragma"] = "no-cache"
        return response
    }

    private func token(_ request: ReceivedRequest) -> HTTPResponse {
        let fields = formFields(of: request)
        var clientID = fields["client_id"]
        var secret = fields["client_secret"]
        if let header = request.headers["Authorization"], header.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6))),
            let pair = String(data: decoded, encoding: .utf8)
        {
            let parts = pair.split(separator: ":", maxSplits: 1).map {
                String($0).removingPercentEncoding ?? String($0)
            }
            clientID = parts.first
            secret = parts.count > 1 ? parts[1] : nil
        }
        guard let clientID, !clientID.isEmpty else {
            return tokenError(400, "invalid_request", "Could not determine client ID from request.")
        }
        guard let client = client(clientID) else {
            return tokenError(401, "invalid_client", "The OAuth client was not found.")
        }
        if let expected = client.secret, secret != expected {
            return tokenError(401, "invalid_client", "Unauthorized")
        }
        switch fields["grant_type"] {
        case "authorization_code"?: return exchange(fields, clientID: clientID)
        case "refresh_token"?: return refresh(fields, clientID: clientID)
        case nil, ""?: return tokenError(400, "invalid_request", "Missing required parameter: grant_type")
        case let other?: return tokenError(400, "unsupported_grant_type", "Invalid grant_type: \(other)")
        }
    }

    private func exchange(_ fields: [String: String], clientID: String) -> HTTPResponse {
        guard let code = fields["code"], !code.isEmpty else {
            return tokenError(400, "invalid_request", "Missing required parameter: code")
        }
        let now = clock.nowMilliseconds()
        guard let record = state.withLock({ $0.codes[code] }), record.clientID == clientID, record.expiresAtMs > now
        else {
            return tokenError(400, "invalid_grant", "Malformed auth code.")
        }
        guard fields["redirect_uri"] == record.redirectURI else {
            return tokenError(400, "redirect_uri_mismatch", "Bad Request")
        }
        guard let verifier = fields["code_verifier"], !verifier.isEmpty else {
            return tokenError(400, "invalid_grant", "Missing code verifier.")
        }
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        guard (43...128).contains(verifier.count), verifier.unicodeScalars.allSatisfy(unreserved.contains),
            Base64URL.encode(SHA256.hash(Array(verifier.utf8))) == record.challenge
        else {
            return tokenError(400, "invalid_grant", "Invalid code verifier.")
        }
        let lifetime = configuration.withLock { $0.accessTokenLifetime }
        let refreshToken = randomToken("1//0g", bytes: 48)
        let accessToken = randomToken("ya29.a0", bytes: 48)
        // The code works once: taken under the lock, so two racing exchanges cannot both succeed.
        let taken = state.withLock { state -> Bool in
            guard state.codes.removeValue(forKey: code) != nil else { return false }
            state.accessTokens = state.accessTokens.filter { $0.value.expiresAtMs > now }
            state.refreshTokens[refreshToken] = SavedState.RefreshToken(
                clientID: clientID, user: record.user, scope: record.scope, revoked: false)
            state.accessTokens[accessToken] = SavedState.AccessToken(
                clientID: clientID, user: record.user, scope: record.scope,
                expiresAtMs: now + lifetime.milliseconds, refreshToken: refreshToken)
            return true
        }
        guard taken else { return tokenError(400, "invalid_grant", "Malformed auth code.") }
        return tokens(accessToken, lifetime: lifetime, scope: record.scope, refreshToken: refreshToken)
    }

    private func refresh(_ fields: [String: String], clientID: String) -> HTTPResponse {
        guard let refreshToken = fields["refresh_token"], !refreshToken.isEmpty else {
            return tokenError(400, "invalid_request", "Missing required parameter: refresh_token")
        }
        let lifetime = configuration.withLock { $0.accessTokenLifetime }
        let accessToken = randomToken("ya29.a0", bytes: 48)
        let now = clock.nowMilliseconds()
        let record = state.withLock { state -> SavedState.RefreshToken? in
            guard let record = state.refreshTokens[refreshToken], !record.revoked, record.clientID == clientID else {
                return nil
            }
            state.accessTokens = state.accessTokens.filter { $0.value.expiresAtMs > now }
            state.accessTokens[accessToken] = SavedState.AccessToken(
                clientID: clientID, user: record.user, scope: record.scope,
                expiresAtMs: now + lifetime.milliseconds, refreshToken: refreshToken)
            return record
        }
        guard let record else { return tokenError(400, "invalid_grant", "Token has been expired or revoked.") }
        return tokens(accessToken, lifetime: lifetime, scope: record.scope, refreshToken: nil)
    }

    private func tokens(_ accessToken: String, lifetime: Duration, scope: String, refreshToken: String?)
        -> HTTPResponse
    {
        struct Body: Encodable {
            // The wire names are RFC 6749's.
            enum CodingKeys: String, CodingKey {
                case accessToken = "access_token"
                case expiresIn = "expires_in"
                case refreshToken = "refresh_token"
                case scope
                case tokenType = "token_type"
            }
            let accessToken: String
            let expiresIn: Int64
            let refreshToken: String?
            let scope: String
            let tokenType: String
        }
        var response = HTTPResponse.json(
            Body(
                accessToken: accessToken, expiresIn: lifetime.milliseconds / 1000, refreshToken: refreshToken,
                scope: scope, tokenType: "Bearer"))
        response.headers["Cache-Control"] = "no-cache, no-store, max-age=0, must-revalidate"
        response.headers["Pragma"] = "no-cache"
        return response
    }

    // MARK: Revocation

    private func revoke(_ request: ReceivedRequest) -> HTTPResponse {
        guard let token = formFields(of: request)["token"] ?? request.query("token"), !token.isEmpty else {
            return tokenError(400, "invalid_request", "Missing required parameter: token")
        }
        guard revoke(token: token) else { return tokenError(400, "invalid_token", "Token expired or revoked") }
        return .json([String: String]())
    }
}
