import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// The authorization endpoint (`GET /o/oauth2/v2/auth`): a request checked as Google checks it (PKCE with `S256` and a
/// `state` required besides), then approved at once as the emulated person, or declined.
extension GoogleOAuthEmulator {
    /// The authorization endpoint: a redirect to `redirect_uri` with a new code, or with `error=access_denied` when
    /// the emulated person declines; an error page for a request that cannot be redirected.
    func approve(_ request: ReceivedRequest) -> HTTPResponse {
        let asked: AuthorizationRequest
        do {
            asked = try authorizationRequest(request)
        } catch {
            return htmlPage(
                error.status, title: "Access blocked: Authorization Error",
                ["Error \(error.status): \(error.error)", escapeHTML(error.detail)])
        }
        let (approves, defaultUser, codeLifetime) = configuration.withLock {
            ($0.approves, $0.defaultUser, $0.codeLifetime)
        }
        guard approves else {
            return redirect(
                to: adding([("error", "access_denied"), ("state", asked.state)], to: asked.redirectURI))
        }
        let user = request.query("login_hint").flatMap { $0.isEmpty ? nil : $0 } ?? defaultUser
        // Clients that form-encode the query (Python's urlencode) send a scope's spaces as `+`; no scope holds a `+`.
        let normalizedScope = asked.scope.replacingOccurrences(of: "+", with: " ").split(separator: " ").joined(
            separator: " ")
        let code = randomToken("4/0A", bytes: 32)
        let now = clock.nowMilliseconds()
        state.withLock { state in
            state.codes = state.codes.filter { $0.value.expiresAtMs > now }
            state.codes[code] = SavedState.Code(
                clientID: asked.clientID, redirectURI: asked.redirectURI, challenge: asked.challenge,
                scope: normalizedScope, user: user, expiresAtMs: now + codeLifetime.milliseconds)
        }
        return redirect(
            to: adding([("code", code), ("scope", normalizedScope), ("state", asked.state)], to: asked.redirectURI))
    }

    /// What a valid authorization request asks for, its parameters as sent.
    private struct AuthorizationRequest {
        let clientID: String
        let redirectURI: String
        let scope: String
        let challenge: String
        let state: String
    }

    /// Why an authorization request gets an error page: its status, OAuth error code and detail.
    private struct AuthorizationRefusal: Error {
        let status: Int
        let error: String
        let detail: String

        init(_ status: Int, _ error: String, _ detail: String) {
            self.status = status
            self.error = error
            self.detail = detail
        }
    }

    /// The parameters of `request`, checked one by one in Google's order: a known client, a loopback redirect, the
    /// `code` response type, a scope, an `S256` PKCE challenge and a `state`.
    private func authorizationRequest(_ request: ReceivedRequest) throws(AuthorizationRefusal)
        -> AuthorizationRequest
    {
        guard let clientID = request.query("client_id"), !clientID.isEmpty else {
            throw AuthorizationRefusal(400, "invalid_request", "Missing required parameter: client_id")
        }
        guard client(clientID) != nil else {
            throw AuthorizationRefusal(401, "invalid_client", "The OAuth client was not found.")
        }
        guard let redirectURI = request.query("redirect_uri"), !redirectURI.isEmpty else {
            throw AuthorizationRefusal(400, "invalid_request", "Missing required parameter: redirect_uri")
        }
        guard Self.isLoopback(redirectURI) else {
            throw AuthorizationRefusal(
                400, "redirect_uri_mismatch",
                "redirect_uri \(redirectURI) is not a loopback address; an installed app redirects to "
                    + "http://127.0.0.1:PORT or http://localhost:PORT")
        }
        guard let responseType = request.query("response_type"), !responseType.isEmpty else {
            throw AuthorizationRefusal(400, "invalid_request", "Missing required parameter: response_type")
        }
        guard responseType == "code" else {
            throw AuthorizationRefusal(400, "unsupported_response_type", "Invalid response_type: \(responseType)")
        }
        guard let scope = request.query("scope"), !scope.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw AuthorizationRefusal(400, "invalid_request", "Missing required parameter: scope")
        }
        let challenge = try Self.challenge(of: request)
        guard let stateParameter = request.query("state"), !stateParameter.isEmpty else {
            throw AuthorizationRefusal(
                400, "invalid_request", "Missing required parameter: state (this emulator requires it)")
        }
        return AuthorizationRequest(
            clientID: clientID, redirectURI: redirectURI, scope: scope, challenge: challenge, state: stateParameter)
    }

    /// The request's PKCE `code_challenge`, which this emulator requires, by the `S256` method: 43 characters of
    /// base64url.
    private static func challenge(of request: ReceivedRequest) throws(AuthorizationRefusal) -> String {
        guard let challenge = request.query("code_challenge"), !challenge.isEmpty else {
            throw AuthorizationRefusal(
                400, "invalid_request", "Missing required parameter: code_challenge (this emulator requires PKCE)")
        }
        let method = request.query("code_challenge_method") ?? "plain"
        guard method == "S256" else {
            throw AuthorizationRefusal(
                400, "invalid_request", "Invalid code_challenge_method: \(method) (this emulator requires S256)")
        }
        guard challenge.count == 43, Base64URL.decode(challenge)?.count == 32 else {
            throw AuthorizationRefusal(
                400, "invalid_request", "Invalid code_challenge: an S256 challenge is 43 characters of base64url")
        }
        return challenge
    }

    /// The registered client `id`, if there is one.
    func client(_ id: String) -> Client? {
        configuration.withLock { $0.clients.first { $0.id == id } }
    }

    /// `http` on a loopback host, any port and path: what Google accepts from an installed app.
    static func isLoopback(_ uri: String) -> Bool {
        guard let url = URL(string: uri), url.scheme == "http", let host = url.host?.lowercased() else {
            return false
        }
        return ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) && url.fragment == nil
    }
}
