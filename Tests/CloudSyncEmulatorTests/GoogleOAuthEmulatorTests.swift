import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The Google OAuth emulator's answers, over loopback, as a client that is not ours would see them.
@Suite struct GoogleOAuthEmulatorTests {
    let clock = ManualClock()
    let oauth: GoogleOAuthEmulator
    let host: EmulatorServer
    let client = GoogleOAuthEmulator.Client.emulatorDefault
    let scope = "https://www.googleapis.com/auth/drive.appdata"
    let redirectURI = "http://127.0.0.1:9/"

    init() throws {
        oauth = GoogleOAuthEmulator(clock: clock)
        host = try EmulatorServer(services: [DriveEmulator(oauth: oauth)])
    }

    func authorizationURL(_ overrides: [String: String?] = [:]) -> URL {
        var items: [String: String?] = [
            "client_id": client.id, "redirect_uri": redirectURI, "response_type": "code", "scope": scope,
            "code_challenge": PKCE(verifier: verifier).challenge, "code_challenge_method": "S256", "state": "xyz",
        ]
        items.merge(overrides) { $1 }
        let pairs = items.compactMap { name, value in value.map { (name, $0) } }.sorted { $0.0 < $1.0 }
        return appendingQuery(host.server.url(GoogleOAuthEmulator.authorizationPath), pairs)
    }

    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    func code() async throws -> String {
        let answer = try await TestBrowser.fetchWithoutRedirect(authorizationURL())
        let location = try #require(answer.headers["Location"])
        return try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
    }

    func post(_ path: String, _ fields: [(String, String)], headers: HTTPHeaders = [:]) async throws -> (
        Int, [String: String]
    ) {
        var request = HTTPRequest(
            method: .post, url: host.server.url(path), headers: headers, body: Data(formURLEncoded(fields).utf8))
        request.headers["Content-Type"] = "application/x-www-form-urlencoded"
        let answer = try await URLSessionTransport().send(request)
        let body = (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:]
        return (answer.status, body.compactMapValues { ($0 as? String) ?? ($0 as? Int).map(String.init) })
    }

    func exchange(_ code: String, verifier: String? = nil, secret: String? = nil, redirect: String? = nil)
        async throws -> (Int, [String: String])
    {
        try await post(
            GoogleOAuthEmulator.tokenPath,
            [
                ("grant_type", "authorization_code"), ("code", code), ("client_id", client.id),
                ("client_secret", secret ?? client.secret!), ("redirect_uri", redirect ?? redirectURI),
                ("code_verifier", verifier ?? self.verifier),
            ])
    }

    @Test func approvalRedirectsWithTheCodeTheScopeAndTheState() async throws {
        defer { host.server.stop() }
        let answer = try await TestBrowser.fetchWithoutRedirect(authorizationURL(["login_hint": "ada@example.com"]))
        #expect(answer.status == 302)
        let location = try #require(answer.headers["Location"])
        let items = Dictionary(
            uniqueKeysWithValues: (URLComponents(string: location)?.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(location.hasPrefix(redirectURI + "?"))
        #expect(items["state"] == "xyz")
        #expect(items["scope"] == scope)
        #expect(items["code"]?.hasPrefix("4/") == true)

        let (status, tokens) = try await exchange(items["code"]!)
        #expect(status == 200)
        #expect(tokens["token_type"] == "Bearer")
        #expect(tokens["expires_in"] == "3599")
        let access = try #require(tokens["access_token"])
        guard
            case .granted(let grant) = oauth.authorize(
                ReceivedRequest(method: "GET", path: "/", headers: ["Authorization": "Bearer \(access)"]))
        else {
            Issue.record("the access token was refused")
            return
        }
        #expect(grant.user == "ada@example.com")
    }

    @Test(
        arguments: [
            (["client_id": nil], 400, "invalid_request"),
            (["client_id": "someone-else.apps.googleusercontent.com"], 401, "invalid_client"),
            (["redirect_uri": "https://evil.example.com/cb"], 400, "redirect_uri_mismatch"),
            (["redirect_uri": nil], 400, "invalid_request"),
            (["response_type": "token"], 400, "unsupported_response_type"),
            (["scope": nil], 400, "invalid_request"),
            (["code_challenge": nil], 400, "invalid_request"),
            (["code_challenge_method": "plain"], 400, "invalid_request"),
            (["code_challenge": "too-short"], 400, "invalid_request"),
            (["state": nil], 400, "invalid_request"),
        ] as [([String: String?], Int, String)])
    func aMalformedAuthorizationRequestGetsAnErrorPageAndNoRedirect(
        _ overrides: [String: String?], _ status: Int, _ error: String
    ) async throws {
        defer { host.server.stop() }
        let answer = try await TestBrowser.fetchWithoutRedirect(authorizationURL(overrides))
        #expect(answer.status == status)
        #expect(answer.headers["Location"] == nil)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("Error \(status): \(error)"))
    }

    @Test func aScopeFormEncodedWithPlusSignsReadsAsSpaceSeparated() async throws {
        defer { host.server.stop() }
        let url = URL(
            string: authorizationURL(["scope": nil]).absoluteString + "&scope=openid+https%3A%2F%2Fexample.com%2Fs")!
        let answer = try await TestBrowser.fetchWithoutRedirect(url)
        let location = try #require(answer.headers["Location"])
        #expect(
            URLComponents(string: location)?.queryItems?.first { $0.name == "scope" }?.value
                == "openid https://example.com/s")
    }

    @Test func aDeclinedConsentRedirectsWithAccessDenied() async throws {
        defer { host.server.stop() }
        oauth.approves = false
        let answer = try await TestBrowser.fetchWithoutRedirect(authorizationURL())
        #expect(answer.status == 302)
        #expect(answer.headers["Location"] == redirectURI + "?error=access_denied&state=xyz")
    }

    @Test func theTokenEndpointAnswersGooglesErrorBodies() async throws {
        defer { host.server.stop() }
        let code = try await code()
        var (status, body) = try await exchange(code, secret: "wrong")
        #expect(status == 401 && body == ["error": "invalid_client", "error_description": "Unauthorized"])
        (status, body) = try await exchange(code, redirect: "http://127.0.0.1:10/")
        #expect(status == 400 && body["error"] == "redirect_uri_mismatch")
        (status, body) = try await exchange(code, verifier: String(repeating: "a", count: 43))
        #expect(status == 400 && body == ["error": "invalid_grant", "error_description": "Invalid code verifier."])
        (status, body) = try await exchange(code)
        #expect(status == 200)
        (status, body) = try await exchange(code)
        #expect(status == 400 && body["error"] == "invalid_grant")
        (status, body) = try await post(
            GoogleOAuthEmulator.tokenPath,
            [("grant_type", "password"), ("client_id", client.id), ("client_secret", client.secret!)])
        #expect(status == 400 && body["error"] == "unsupported_grant_type")
        (status, body) = try await post(
            GoogleOAuthEmulator.tokenPath, [("grant_type", "refresh_token"), ("client_id", "nobody")])
        #expect(status == 401 && body["error"] == "invalid_client")
    }

    @Test func codesExpire() async throws {
        defer { host.server.stop() }
        let code = try await code()
        clock.advance(by: .seconds(601))
        let (status, body) = try await exchange(code)
        #expect(status == 400 && body["error"] == "invalid_grant")
    }

    @Test func clientCredentialsMayComeByHTTPBasic() async throws {
        defer { host.server.stop() }
        let code = try await code()
        let basic = Data("\(client.id):\(client.secret!)".utf8).base64EncodedString()
        let (status, body) = try await post(
            GoogleOAuthEmulator.tokenPath,
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                ("code_verifier", verifier),
            ],
            headers: ["Authorization": "Basic \(basic)"])
        #expect(status == 200)
        #expect(body["refresh_token"]?.hasPrefix("1//") == true)
    }

    @Test func refreshGrantsNewAccessTokensUntilTheRefreshTokenIsRevokedAtTheRevokeEndpoint() async throws {
        defer { host.server.stop() }
        let (_, granted) = try await exchange(try await code())
        let refresh = try #require(granted["refresh_token"])
        let fields = [
            ("grant_type", "refresh_token"), ("refresh_token", refresh), ("client_id", client.id),
            ("client_secret", client.secret!),
        ]
        var (status, body) = try await post(GoogleOAuthEmulator.tokenPath, fields)
        #expect(status == 200)
        #expect(body["refresh_token"] == nil)
        #expect(body["access_token"] != granted["access_token"])
        let access = try #require(body["access_token"])

        (status, _) = try await post(GoogleOAuthEmulator.revokePath, [("token", refresh)])
        #expect(status == 200)
        (status, body) = try await post(GoogleOAuthEmulator.tokenPath, fields)
        #expect(
            status == 400
                && body == ["error": "invalid_grant", "error_description": "Token has been expired or revoked."])
        // The access tokens it granted die with it.
        if case .granted = oauth.authorize(
            ReceivedRequest(method: "GET", path: "/", queryItems: [.init(name: "access_token", value: access)]))
        {
            Issue.record("an access token of a revoked refresh token was accepted")
        }
        (status, body) = try await post(GoogleOAuthEmulator.revokePath, [("token", refresh + "x")])
        #expect(status == 400 && body["error"] == "invalid_token")
    }

    @Test func bearerChecksAnswerGoogles401And403() async throws {
        defer { host.server.stop() }
        let (_, granted) = try await exchange(try await code())
        let access = try #require(granted["access_token"])
        func refusal(_ check: GoogleOAuthEmulator.BearerCheck) -> (Int, String, String?)? {
            guard case .refused(let response) = check else { return nil }
            let body = try? JSONSerialization.jsonObject(with: response.body) as? [String: [String: Any]]
            let reason = ((body?["error"]?["errors"] as? [[String: Any]])?.first?["reason"] as? String) ?? ""
            return (response.status, reason, response.headers["WWW-Authenticate"])
        }
        let missing = refusal(oauth.authorize(ReceivedRequest(method: "GET", path: "/")))
        #expect(missing?.0 == 401 && missing?.1 == "required")
        let scoped = refusal(oauth.authorize(bearer(access), scope: "https://www.googleapis.com/auth/drive"))
        #expect(scoped?.0 == 403 && scoped?.1 == "insufficientPermissions")
        if case .refused = oauth.authorize(bearer(access), scope: scope) { Issue.record("a valid token was refused") }
        clock.advance(by: .seconds(3599))
        let expired = refusal(oauth.authorize(bearer(access)))
        #expect(expired?.0 == 401 && expired?.1 == "authError")
        #expect(expired?.2?.contains("invalid_token") == true)
    }

    func bearer(_ token: String) -> ReceivedRequest {
        ReceivedRequest(method: "GET", path: "/", headers: ["Authorization": "Bearer \(token)"])
    }
}
