import CloudSync
import CloudSyncHTTP
import Foundation

/// OAuth 2.0 for installed apps, as Google runs it: an authorization code with PKCE (S256), delivered by a redirect
/// to a one-shot listener on `127.0.0.1:<random port>`, exchanged at the token endpoint for a refresh token.
///
/// The sign-in prints the address to open and opens nothing itself. With `SignInInteraction.noBrowser` it also
/// reads the address the browser was sent to from the input, for a machine without a browser: the person opens the
/// address elsewhere, the redirect to `127.0.0.1` fails to load there, and they paste it from the address bar.
/// Whichever arrives first wins. The redirect's `state` must be the request's, or nothing is stored.
public struct InstalledAppSignIn: ProviderSignIn {
    /// The client and its endpoints.
    public let client: OAuthClientConfiguration
    private let tokens: OAuthTokenClient

    /// A sign-in for `client`, calling its token endpoint over `transport`.
    public init(client: OAuthClientConfiguration, transport: any HTTPTransport = URLSessionTransport()) {
        self.client = client
        tokens = OAuthTokenClient(configuration: client, transport: transport)
    }

    public var method: String { "OAuth 2.0 for installed apps (authorization code with PKCE, loopback redirect)" }

    public var credentials: [StoredCredential] { [.oauthRefreshToken] }

    /// The address the person opens: the authorization endpoint with the client, the loopback redirect, the scopes,
    /// the PKCE challenge and `state`.
    public func authorizationURL(redirectURI: String, pkce: PKCE, state: String) -> URL {
        appendingQuery(
            client.authorizationEndpoint,
            [
                ("client_id", client.clientID), ("redirect_uri", redirectURI), ("response_type", "code"),
                ("scope", client.scopes.joined(separator: " ")), ("code_challenge", pkce.challenge),
                ("code_challenge_method", PKCE.method), ("state", state),
            ])
    }

    public func signIn(_ interaction: SignInInteraction) async throws(CloudSyncError) -> [StoredCredential: String] {
        let pkce = PKCE()
        let state = randomOAuthState()
        let answer = try SignInAnswer<String>(
            listen: true, paste: interaction.noBrowser, interaction: interaction,
            decide: { Self.decide($0, state: state) },
            interpret: { line in
                guard let url = URL(string: line),
                    let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?
                        .queryItems,
                    items.contains(where: { $0.name == "code" || $0.name == "error" })
                else {
                    return .ignore(
                        "That is not the address the browser was sent to; paste all of it, from http:// on.")
                }
                return Self.decide(items, state: state)
            })
        defer { answer.stop() }
        let redirectURI = "http://127.0.0.1:\(answer.port ?? 0)/"
        let url = authorizationURL(redirectURI: redirectURI, pkce: pkce, state: state)
        interaction.show("Open this address in a browser and allow access:\n\n  \(url.absoluteString)\n")
        if interaction.noBrowser {
            interaction.show(
                "The browser is then sent to \(redirectURI)…, which may fail to load on another machine: paste that "
                    + "whole address here.")
        } else {
            interaction.show("Waiting for the browser to come back to \(redirectURI) …")
        }
        let code = try await answer.wait(interaction, for: "waiting for the redirect to \(redirectURI)")
        let granted = try await tokens.exchange(code: code, verifier: pkce.verifier, redirectURI: redirectURI)
        guard let refreshToken = granted.refreshToken, !refreshToken.isEmpty else {
            throw CloudSyncError(
                .notSignedIn,
                "the token endpoint granted access but no refresh token, so later runs could not sign in; remove "
                    + "this app's access in the account's security settings and sign in again")
        }
        return [.oauthRefreshToken: refreshToken]
    }

    /// The code from a redirect's query, or why there is none (RFC 6749 §4.1.2): the state must match, an `error`
    /// fails the sign-in, and a request with neither is not the redirect.
    static func decide(_ items: [URLQueryItem], state: String) -> AnswerDecision<String> {
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        guard value("code") != nil || value("error") != nil else {
            return .ignore("This address carries no authorization code.")
        }
        guard value("state") == state else {
            return .finish(
                .failure(
                    CloudSyncError(
                        .notSignedIn,
                        "the redirect's state does not match this sign-in's, so it did not come from the request "
                            + "this sign-in made; nothing was stored, run the command again")))
        }
        if let error = value("error") {
            let description = value("error_description").map { ": \($0)" } ?? ""
            return .finish(
                .failure(CloudSyncError(.notSignedIn, "the authorization server refused: \(error)\(description)")))
        }
        return .finish(.success(value("code") ?? ""))
    }
}
