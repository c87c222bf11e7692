import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

let driveScope = "https://www.googleapis.com/auth/drive.appdata"

/// A Google OAuth emulator on its own loopback server, and a client configured against it.
struct GoogleEmulator {
    let host: EmulatorServer
    let oauth: GoogleOAuthEmulator
    let client: OAuthClientConfiguration

    init(clock: any StoreClock = SystemClock(), configuration: GoogleOAuthEmulator.Configuration = .init()) throws {
        oauth = GoogleOAuthEmulator(configuration: configuration, clock: clock)
        host = try EmulatorServer(services: [DriveEmulator(oauth: oauth)])
        let urls = host.urls["drive"]!
        client = OAuthClientConfiguration(
            clientID: urls["clientId"]!, clientSecret: urls["clientSecret"],
            authorizationEndpoint: URL(
                string: urls["authEndpoint"]!)!, tokenEndpoint: URL(string: urls["tokenEndpoint"]!)!,
            scopes: [driveScope])
    }

    /// A fresh refresh token, from a whole sign-in against the emulator.
    func signedIn(clock: any StoreClock = SystemClock()) async throws -> String {
        let person = Person(.openInBrowser)
        let credentials = try await InstalledAppSignIn(client: client).signIn(person.interaction(clock: clock))
        return try #require(credentials[.oauthRefreshToken])
    }
}

/// The person at the terminal: reads what a sign-in shows and does what a test wants with the address to open.
final class Person: Sendable {
    enum Behaviour: Sendable {
        /// Opens the address in a browser that follows the redirect to the loopback listener.
        case openInBrowser
        /// Opens it where the redirect cannot be followed, and pastes the address it led to.
        case pasteRedirect
        /// Does something of the test's own with the address.
        case custom(@Sendable (URL) async -> Void)
        /// Does nothing.
        case ignore
    }

    private let behaviour: Behaviour
    private let shown = Mutex<[String]>([])
    private let pasted = Mutex<[String]>([])
    private let pasteReady = DispatchSemaphore(value: 0)
    let browserAnswers = Mutex<[HTTPResponse]>([])

    init(_ behaviour: Behaviour) { self.behaviour = behaviour }

    /// Every message the sign-in showed, joined.
    var transcript: String { shown.withLock { $0.joined(separator: "\n") } }

    /// An interaction over this person.
    func interaction(noBrowser: Bool = false, timeout: Duration = .seconds(120), clock: any StoreClock = SystemClock())
        -> SignInInteraction
    {
        SignInInteraction(
            show: { [self] in show($0) }, readLine: { [self] in readLine() }, noBrowser: noBrowser, timeout: timeout,
            clock: clock)
    }

    /// Makes `line` the next line the sign-in reads.
    func paste(_ line: String) {
        pasted.withLock { $0.append(line) }
        pasteReady.signal()
    }

    /// Ends the input.
    func endInput() { pasteReady.signal() }

    private func readLine() -> String? {
        pasteReady.wait()
        return pasted.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    private func show(_ message: String) {
        shown.withLock { $0.append(message) }
        guard let url = Self.address(in: message) else { return }
        switch behaviour {
        case .openInBrowser:
            Task {
                if let answer = try? await TestBrowser.open(url) { browserAnswers.withLock { $0.append(answer) } }
            }
        case .pasteRedirect:
            Task {
                guard let answer = try? await TestBrowser.fetchWithoutRedirect(url) else { return }
                browserAnswers.withLock { $0.append(answer) }
                if let location = answer.headers["Location"] {
                    paste(location)
                } else if let token = Self.tokenOnPage(answer) {
                    paste(token)
                }
            }
        case .custom(let action): Task { await action(url) }
        case .ignore: break
        }
    }

    /// The address to open in a message: an indented line starting with `http`.
    static func address(in message: String) -> URL? {
        message.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
            $0.hasPrefix("http://") && $0.contains("?")
        }.flatMap { URL(string: $0) }
    }

    /// The token the emulator's CloudKit sign-in page shows for pasting.
    static func tokenOnPage(_ answer: HTTPResponse) -> String? {
        let page = String(decoding: answer.body, as: UTF8.self)
        guard let start = page.range(of: "<code id=\"ckWebAuthToken\">"),
            let end = page.range(of: "</code>", range: start.upperBound..<page.endIndex)
        else { return nil }
        return String(page[start.upperBound..<end.lowerBound])
    }
}

/// The query items of `url`, by name.
func queryItems(_ url: String) -> [String: String] {
    var items: [String: String] = [:]
    for item in URLComponents(string: url)?.queryItems ?? [] { items[item.name] = item.value }
    return items
}

/// A received request carrying `Authorization: Bearer token`, as a data API's handler sees it.
func bearerRequest(_ token: String) -> ReceivedRequest {
    ReceivedRequest(method: "GET", path: "/drive/v3/about", headers: ["Authorization": "Bearer \(token)"])
}

/// A port nothing listens on right now (briefly bound, then released), for a callback address fixed in advance.
///
/// It is taken below the kernel's ephemeral range (32768–60999 on Linux), which listeners on port 0 and outgoing
/// connections draw from: a port from that range, released, is soon handed to another test running meanwhile, and the
/// sign-in's own bind then fails with "address already in use".
func freePort() throws -> UInt16 {
    var random = SystemRandomNumberGenerator()
    for _ in 0..<200 {
        let candidate = UInt16.random(in: 20_000..<32_768, using: &random)
        guard let probe = try? LoopbackHTTPServer(port: candidate) else { continue }
        probe.stop()
        return candidate
    }
    throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "no free port below 32768"])
}
