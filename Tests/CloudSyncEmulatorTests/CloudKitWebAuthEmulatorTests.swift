import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The CloudKit web-auth emulator's answers, over loopback.
@Suite struct CloudKitWebAuthEmulatorTests {
    let clock = ManualClock()
    let container = "iCloud.com.example.cloudsync"

    func start(_ configure: (inout CloudKitWebAuthEmulator.Configuration) -> Void = { _ in }) throws -> (
        EmulatorServer, CloudKitWebAuthEmulator
    ) {
        var configuration = CloudKitWebAuthEmulator.Configuration()
        configure(&configuration)
        let webAuth = CloudKitWebAuthEmulator(configuration: configuration, clock: clock)
        return (try EmulatorServer(services: [CloudKitEmulator(webAuth: webAuth)]), webAuth)
    }

    func caller(
        _ host: EmulatorServer, apiToken: String? = CloudKitWebAuthEmulator.defaultAPIToken, token: String? = nil
    )
        async throws -> (HTTPResponse, [String: Any])
    {
        var items: [(String, String)] = []
        if let apiToken { items.append(("ckAPIToken", apiToken)) }
        if let token { items.append(("ckWebAuthToken", token)) }
        let url = appendingQuery(host.server.url("/database/1/\(container)/development/public/users/caller"), items)
        let answer = try await URLSessionTransport().send(HTTPRequest(method: .get, url: url))
        return (answer, (try? JSONSerialization.jsonObject(with: answer.body)) as? [String: Any] ?? [:])
    }

    @Test func withoutAnAPITokenTheAnswerIsAuthenticationFailed() async throws {
        let (host, _) = try start()
        defer { host.server.stop() }
        for apiToken in [nil, "unknown"] {
            let (answer, body) = try await caller(host, apiToken: apiToken)
            #expect(answer.status == 401)
            #expect(body["serverErrorCode"] as? String == "AUTHENTICATION_FAILED")
            #expect(body["uuid"] is String)
        }
    }

    @Test func withoutAWebAuthTokenTheAnswerIs421WithASignInAddressThatWorksOnce() async throws {
        let (host, _) = try start()
        defer { host.server.stop() }
        let (answer, body) = try await caller(host)
        #expect(answer.status == 421)
        #expect(body["serverErrorCode"] as? String == "AUTHENTICATION_REQUIRED")
        let redirect = try #require(body["redirectURL"] as? String)
        #expect(redirect.hasPrefix(host.baseURL.absoluteString + CloudKitWebAuthEmulator.signInPath + "?session="))

        let page = try await TestBrowser.open(URL(string: redirect + "&appleID=ada@example.com")!)
        #expect(page.status == 200)
        let text = String(decoding: page.body, as: UTF8.self)
        let start = try #require(text.range(of: "<code id=\"ckWebAuthToken\">"))
        let token = String(text[start.upperBound...].prefix { $0 != "<" })
        let (signedIn, identity) = try await caller(host, token: token)
        #expect(signedIn.status == 200)
        let users = identity["users"] as? [[String: String]]
        #expect(users?.first?["userRecordName"] == CloudKitWebAuthEmulator.userRecordName("ada@example.com", container))
        #expect(signedIn.headers[CloudKitWebAuthEmulator.tokenHeader].map { $0 != token } == true)

        let again = try await TestBrowser.open(URL(string: redirect)!)
        #expect(again.status == 400)
    }

    @Test func aConfiguredCallbackReceivesTheTokenPercentEncoded() async throws {
        let (host, _) = try start {
            $0.apiTokens[CloudKitWebAuthEmulator.defaultAPIToken] = URL(string: "http://127.0.0.1:9/cb?app=1")!
        }
        defer { host.server.stop() }
        let (_, body) = try await caller(host)
        let redirect = try #require(body["redirectURL"] as? String)
        let answer = try await TestBrowser.fetchWithoutRedirect(URL(string: redirect)!)
        #expect(answer.status == 302)
        let location = try #require(answer.headers["Location"])
        #expect(location.hasPrefix("http://127.0.0.1:9/cb?app=1&ckWebAuthToken=CK%2F1%2B"))
        #expect(!location.contains("+"))
    }

    @Test func oldTokensKeepWorkingUnlessTokensAreSingleUse() async throws {
        for singleUse in [false, true] {
            let (host, webAuth) = try start { $0.singleUseTokens = singleUse }
            defer { host.server.stop() }
            let first = webAuth.issueToken(container: container, environment: "development")
            let (answer, _) = try await caller(host, token: first)
            let second = try #require(answer.headers[CloudKitWebAuthEmulator.tokenHeader])
            #expect(try await caller(host, token: second).0.status == 200)
            #expect(try await caller(host, token: first).0.status == (singleUse ? 421 : 200))
        }
    }

    @Test func tokensExpireAfterTheirLifetimeAndOtherContainersRefuseThem() async throws {
        let (host, webAuth) = try start { $0.tokenLifetime = .seconds(1800) }
        defer { host.server.stop() }
        let token = webAuth.issueToken(container: "iCloud.com.example.other", environment: "development")
        #expect(try await caller(host, token: token).0.status == 421)
        let mine = webAuth.issueToken(container: container, environment: "development")
        clock.advance(by: .seconds(1800))
        #expect(try await caller(host, token: mine).0.status == 421)
    }
}
