import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// OAuth 2.0 for installed apps against the Google emulator, over real loopback sockets.
@Suite struct GoogleSignInTests {
    @Test func theChallengeIsRFC7636sS256OfTheVerifier() {
        // RFC 7636, appendix B.
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let fresh = PKCE()
        #expect(fresh.verifier.count == 43)
        #expect(fresh.verifier != PKCE().verifier)
    }

    @Test func aBrowserFollowingTheRedirectCompletesTheSignInWithARefreshToken() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let person = Person(.openInBrowser)
        let credentials = try await InstalledAppSignIn(client: google.client).signIn(person.interaction())
        let refreshToken = try #require(credentials[.oauthRefreshToken])
        #expect(google.oauth.isActive(refreshToken: refreshToken))

        // What the person was shown: the authorization address, with PKCE S256, state and a loopback redirect.
        let url = try #require(Person.address(in: person.transcript))
        let items = queryItems(url.absoluteString)
        #expect(url.absoluteString.hasPrefix(google.client.authorizationEndpoint.absoluteString + "?"))
        #expect(items["client_id"] == google.client.clientID)
        #expect(items["response_type"] == "code")
        #expect(items["code_challenge_method"] == "S256")
        #expect(items["code_challenge"]?.count == 43)
        #expect(items["scope"] == driveScope)
        #expect(items["state"].map { !$0.isEmpty } == true)
        #expect(items["redirect_uri"].map { $0.hasPrefix("http://127.0.0.1:") } == true)
        #expect(!person.transcript.contains(refreshToken))
        let page = try #require(person.browserAnswers.withLock { $0.first })
        #expect(page.status == 200)
        #expect(String(decoding: page.body, as: UTF8.self).contains("Signed in"))
    }

    @Test func withNoBrowserThePastedRedirectAddressCompletesTheSignIn() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let person = Person(.pasteRedirect)
        let credentials = try await InstalledAppSignIn(client: google.client).signIn(
            person.interaction(noBrowser: true))
        let refreshToken = try #require(credentials[.oauthRefreshToken])
        #expect(google.oauth.isActive(refreshToken: refreshToken))
        #expect(person.transcript.contains("paste that whole address here"))
        // The answer came by paste: nothing reached the listener.
        let redirect = try #require(person.browserAnswers.withLock { $0.first })
        #expect(redirect.status == 302)
    }

    @Test func aPastedLineThatIsNotTheAddressIsExplainedAndTheNextOneUsed() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let person = Person(
            .custom { _ in })
        let signIn = InstalledAppSignIn(client: google.client)
        let running = Task { try await signIn.signIn(person.interaction(noBrowser: true)) }
        try await waitUntil { Person.address(in: person.transcript) != nil }
        let url = try #require(Person.address(in: person.transcript))
        person.paste("what do I do now?")
        let redirect = try await TestBrowser.fetchWithoutRedirect(url)
        person.paste(try #require(redirect.headers["Location"]))
        let credentials = try await running.value
        #expect(credentials[.oauthRefreshToken] != nil)
        #expect(person.transcript.contains("That is not the address the browser was sent to"))
    }

    @Test func aRedirectWithAnotherStateIsRefusedAndNothingIsExchanged() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        // The browser's visit runs beside the sign-in: `opened` says it has its answer (nil: none came).
        let forged = Mutex<(opened: Bool, answer: HTTPResponse?)>((false, nil))
        let person = Person(
            .custom { url in
                // Someone else's redirect reaches the listener first: a code, but not this sign-in's state.
                let redirectURI = queryItems(url.absoluteString)["redirect_uri"]!
                let answer = try? await TestBrowser.open(URL(string: redirectURI + "?code=4/stolen&state=forged")!)
                forged.withLock { $0 = (true, answer) }
            })
        await #expect {
            _ = try await InstalledAppSignIn(client: google.client).signIn(person.interaction())
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn && error?.message.contains("state does not match") == true
        }
        // The sign-in can fail before the browser's task has read its page: wait for the visit to end.
        try await waitUntil { forged.withLock { $0.opened } }
        #expect(forged.withLock { $0.answer?.status } == 400)
        #expect(google.oauth.activeRefreshTokenCount == 0)
    }

    @Test func aRefusedConsentFailsTheSignInWithTheServersError() async throws {
        var configuration = GoogleOAuthEmulator.Configuration()
        configuration.approves = false
        let google = try GoogleEmulator(configuration: configuration)
        defer { google.host.server.stop() }
        await #expect {
            _ = try await InstalledAppSignIn(client: google.client).signIn(Person(.openInBrowser).interaction())
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn && error?.message.contains("access_denied") == true
        }
    }

    @Test func nobodyAnsweringTimesOutOnTheClock() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let clock = ManualClock()
        let person = Person(.ignore)
        let signIn = InstalledAppSignIn(client: google.client)
        let running = Task { try await signIn.signIn(person.interaction(timeout: .seconds(300), clock: clock)) }
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(300))
        await #expect {
            _ = try await running.value
        } throws: { ($0 as? CloudSyncError)?.code == .timeout }
    }

    @Test func aVerifierOtherThanTheChallengedOneIsRefusedAndTheRightOneAccepted() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        // A redirect target that is never reached: the test reads the code from the redirect itself.
        let redirectURI = "http://127.0.0.1:9/"
        let pkce = PKCE()
        let url = InstalledAppSignIn(client: google.client).authorizationURL(
            redirectURI: redirectURI, pkce: pkce, state: "s1")
        let redirect = try await TestBrowser.fetchWithoutRedirect(url)
        #expect(redirect.status == 302)
        let location = try #require(redirect.headers["Location"])
        #expect(location.hasPrefix(redirectURI + "?"))
        #expect(queryItems(location)["state"] == "s1")
        let code = try #require(queryItems(location)["code"])

        let tokens = OAuthTokenClient(configuration: google.client)
        await #expect {
            _ = try await tokens.exchange(code: code, verifier: PKCE().verifier, redirectURI: redirectURI)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn
                && error?.message.contains("invalid_grant: Invalid code verifier.") == true
                && error?.message.contains(code) == false
        }
        let granted = try await tokens.exchange(code: code, verifier: pkce.verifier, redirectURI: redirectURI)
        #expect(granted.refreshToken != nil)
        #expect(granted.expiresIn == 3599)
        #expect(granted.scope == driveScope)
        // A code works once.
        await #expect {
            _ = try await tokens.exchange(code: code, verifier: pkce.verifier, redirectURI: redirectURI)
        } throws: { ($0 as? CloudSyncError)?.code == .notSignedIn }
    }

    @Test func aWrongClientSecretIsAMisconfiguredClientNamingNoSecret() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        var client = google.client
        client.clientSecret = "not-the-secret-0123"
        await #expect {
            _ = try await OAuthTokenClient(configuration: client).refresh("1//whatever")
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .containerMisconfigured && error?.message.contains("invalid_client") == true
                && error?.message.contains("not-the-secret-0123") == false
        }
    }

    @Test func accessTokensComeFromTheRefreshTokenAndAreRenewedWhenTheyExpire() async throws {
        let clock = ManualClock()
        let google = try GoogleEmulator(clock: clock)
        defer { google.host.server.stop() }
        let refreshToken = try await google.signedIn()
        let tokens = OAuthAccessTokens(
            client: OAuthTokenClient(configuration: google.client), refreshToken: refreshToken, clock: clock)

        var request = HTTPRequest(method: .get, url: google.host.server.url("/drive/v3/about"))
        try await tokens.authorize(&request)
        let first = try #require(request.headers["Authorization"])
        guard case .granted(let grant) = google.oauth.authorize(bearerRequest(String(first.dropFirst(7)))) else {
            Issue.record("the emulator refused the access token")
            return
        }
        #expect(grant.user == "user@example.com")
        #expect(grant.scopes == [driveScope])

        // The same token until a minute before it expires; then a new one, and the old one is refused.
        try await tokens.authorize(&request)
        #expect(request.headers["Authorization"] == first)
        clock.advance(by: .seconds(3599))
        if case .granted = google.oauth.authorize(bearerRequest(String(first.dropFirst(7)))) {
            Issue.record("an expired access token was accepted")
        }
        try await tokens.authorize(&request)
        let second = try #require(request.headers["Authorization"])
        #expect(second != first)
        guard case .granted = google.oauth.authorize(bearerRequest(String(second.dropFirst(7)))) else {
            Issue.record("the renewed access token was refused")
            return
        }
    }

    @Test func aRevokedRefreshTokenIsNotSignedInNamingTheLoginCommand() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let refreshToken = try await google.signedIn()
        #expect(google.oauth.revoke(token: refreshToken))
        let tokens = OAuthAccessTokens(
            client: OAuthTokenClient(configuration: google.client), refreshToken: refreshToken,
            signInAdvice: "run `cloudsync login p.yaml --provider drive`")
        var request = HTTPRequest(method: .get, url: google.host.server.url("/drive/v3/about"))
        await #expect {
            try await tokens.authorize(&request)
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn
                && error?.message.contains("invalid_grant: Token has been expired or revoked.") == true
                && error?.message.hasSuffix("run `cloudsync login p.yaml --provider drive`") == true
                && error?.message.contains(refreshToken) == false
        }
        #expect(request.headers["Authorization"] == nil)
    }

    @Test func aRefusedAccessTokenIsRenewedOnceAfterA401() async throws {
        let google = try GoogleEmulator()
        defer { google.host.server.stop() }
        let refreshToken = try await google.signedIn()
        let tokens = OAuthAccessTokens(
            client: OAuthTokenClient(configuration: google.client), refreshToken: refreshToken)
        var request = HTTPRequest(method: .get, url: google.host.server.url("/drive/v3/about"))
        try await tokens.authorize(&request)
        let first = try #require(request.headers["Authorization"])
        google.oauth.revoke(token: String(first.dropFirst(7)))
        #expect(try await tokens.refresh(after: HTTPResponse(status: 401)))
        try await tokens.authorize(&request)
        #expect(request.headers["Authorization"] != first)
    }
}
