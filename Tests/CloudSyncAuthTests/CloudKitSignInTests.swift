import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// CloudKit's web sign-in against the CloudKit emulator, over real loopback sockets.
@Suite struct CloudKitSignInTests {
    let container = "iCloud.com.example.cloudsync"

    func emulator(callback: URL? = nil) throws -> (EmulatorServer, CloudKitWebAuthEmulator) {
        let webAuth = CloudKitWebAuthEmulator()
        webAuth.setSignInCallback(callback, for: CloudKitWebAuthEmulator.defaultAPIToken)
        return (try EmulatorServer(services: [CloudKitEmulator(webAuth: webAuth)]), webAuth)
    }

    func signIn(
        _ host: EmulatorServer, callback: URL? = nil, apiToken: String = CloudKitWebAuthEmulator.defaultAPIToken
    )
        -> CloudKitWebSignIn
    {
        CloudKitWebSignIn(
            endpoint: host.baseURL, container: container, environment: "development", apiToken: apiToken,
            callback: callback)
    }

    @Test func theTokenArrivesAtTheLoopbackCallbackAndTheRotatedOneIsKept() async throws {
        let callback = URL(string: "http://127.0.0.1:\(try freePort())/cloudkit-callback")!
        let (host, webAuth) = try emulator(callback: callback)
        defer { host.server.stop() }
        let person = Person(.openInBrowser)
        let credentials = try await signIn(host, callback: callback).signIn(person.interaction())
        let token = try #require(credentials[.cloudKitWebAuthToken])
        #expect(person.transcript.contains("Waiting for the browser to come back to \(callback.absoluteString)"))
        #expect(person.transcript.contains(CloudKitWebAuthEmulator.signInPath + "?session="))
        #expect(!person.transcript.contains(token))
        #expect(!person.transcript.contains(CloudKitWebAuthEmulator.defaultAPIToken))
        let page = try #require(person.browserAnswers.withLock { $0.first })
        #expect(page.status == 200)

        // The kept token works, and each answer hands over its successor, which replaces it in the provider's state.
        let state = ProviderState(provider: "ck", store: InMemoryProviderStateStore())
        try state.replace(.cloudKitWebAuthToken, with: token)
        let rotating = try CloudKitWebAuthToken(state: state)
        let caller = host.server.url("/database/1/\(container)/development/public/users/caller")
        let transport = URLSessionTransport()
        for _ in 0..<3 {
            let before = try #require(rotating.value)
            let answer = try await transport.send(
                HTTPRequest(
                    method: .get, url: rotating.authorizing(caller, apiToken: CloudKitWebAuthEmulator.defaultAPIToken)))
            #expect(answer.status == 200)
            #expect(try rotating.rotate(from: answer))
            let after = try #require(try state.credential(.cloudKitWebAuthToken))
            #expect(after != before)
            #expect(after == rotating.value)
            // Tokens carry `+`, `/` and `=`: only a client that percent-encodes them gets this far.
            #expect(after.contains("+") && after.contains("/"))
        }
        let name = CloudKitWebAuthEmulator.userRecordName("user@example.com", container)
        let body = try #require(
            try JSONSerialization.jsonObject(
                with: try await transport.send(
                    HTTPRequest(
                        method: .get,
                        url: rotating.authorizing(caller, apiToken: CloudKitWebAuthEmulator.defaultAPIToken))
                ).body) as? [String: [[String: String]]])
        #expect(body["users"]?.first?["userRecordName"] == name)
        _ = webAuth
    }

    @Test func withoutACallbackTheTokenShownOnThePageIsPasted() async throws {
        let (host, _) = try emulator()
        defer { host.server.stop() }
        let person = Person(.pasteRedirect)
        let credentials = try await signIn(host).signIn(person.interaction())
        let token = try #require(credentials[.cloudKitWebAuthToken])
        #expect(person.transcript.contains("paste here the ckWebAuthToken"))
        let shown = try #require(person.browserAnswers.withLock { $0.first }.flatMap(Person.tokenOnPage))
        // The sign-in tried the pasted token, which answered with its successor: that is the one kept.
        #expect(token != shown)
        let caller = host.server.url("/database/1/\(container)/development/public/users/caller")
        let answer = try await URLSessionTransport().send(
            HTTPRequest(
                method: .get,
                url: appendingQuery(
                    caller, [("ckAPIToken", CloudKitWebAuthEmulator.defaultAPIToken), ("ckWebAuthToken", token)])))
        #expect(answer.status == 200)
    }

    @Test func aPastedCallbackAddressWithAnEncodedTokenIsDecoded() async throws {
        let (host, webAuth) = try emulator()
        defer { host.server.stop() }
        let token = webAuth.issueToken(container: container, environment: "development")
        let person = Person(
            .custom { _ in })
        let running = Task { try await signIn(host).signIn(person.interaction()) }
        try await waitUntil { Person.address(in: person.transcript) != nil }
        let encoded = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        #expect(encoded.contains("%2B"))
        person.paste("https://example.com/cloudkit-callback?ckWebAuthToken=\(encoded)")
        let credentials = try await running.value
        #expect(credentials[.cloudKitWebAuthToken] != nil)
    }

    @Test func aRefusedPastedTokenIsNotSignedIn() async throws {
        let (host, _) = try emulator()
        defer { host.server.stop() }
        let person = Person(
            .custom { _ in })
        let running = Task { try await signIn(host).signIn(person.interaction()) }
        try await waitUntil { Person.address(in: person.transcript) != nil }
        person.paste("CK/1+not-a-token=")
        await #expect {
            _ = try await running.value
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn && error?.message.contains("AUTHENTICATION_REQUIRED") == true
        }
    }

    @Test func anUnknownAPITokenIsAMisconfiguredContainerBeforeAnythingIsShown() async throws {
        let (host, _) = try emulator()
        defer { host.server.stop() }
        let person = Person(.ignore)
        await #expect {
            _ = try await signIn(host, apiToken: "wrong-api-token").signIn(person.interaction())
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .containerMisconfigured && error?.message.contains("AUTHENTICATION_FAILED") == true
                && error?.message.contains("wrong-api-token") == false
        }
        #expect(person.transcript.isEmpty)
    }

    @Test func theEndOfTheInputWithoutACallbackFailsTheSignIn() async throws {
        let (host, _) = try emulator()
        defer { host.server.stop() }
        let person = Person(.ignore)
        person.endInput()
        await #expect {
            _ = try await signIn(host).signIn(person.interaction())
        } throws: { ($0 as? CloudSyncError)?.code == .notSignedIn }
    }
}
