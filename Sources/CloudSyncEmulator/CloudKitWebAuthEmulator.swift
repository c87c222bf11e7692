import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// CloudKit Web Services' user authentication, with a sign-in that needs no person: API tokens, the
/// `AUTHENTICATION_REQUIRED` answer with its sign-in address, the sign-in page that hands out a `ckWebAuthToken`,
/// the token's rotation on every answer, and `users/caller`.
///
/// Faithful where a client can tell (api-facts B.2, B.6):
/// - `ckAPIToken` must be one of ``Configuration/apiTokens``, else 401 `AUTHENTICATION_FAILED`.
/// - A call that needs a user without a valid `ckWebAuthToken` gets 421 `AUTHENTICATION_REQUIRED` with a
///   `redirectURL`: this emulator's sign-in page, which signs in at once (as the Apple ID given by `appleID`, default
///   ``Configuration/defaultAppleID``) and sends the token to the API token's sign-in callback as
///   `?ckWebAuthToken=…`, or shows it for pasting when the API token has none — as Dashboard's "Sign In Callback".
/// - Every answer to a call made with a valid token carries its successor in `X-Apple-CloudKit-Web-Auth-Token`.
///   The old token keeps working, as observed on the live service (the documentation says one round trip); with
///   ``Configuration/singleUseTokens`` only the newest works. Tokens hold `+`, `/` and `=`, so a client that
///   forgets to percent-encode them fails here.
/// - A token lasts ``Configuration/tokenLifetime`` from when it was issued (default two weeks, Apple's "keep me
///   signed in"; 30 minutes otherwise).
public final class CloudKitWebAuthEmulator: Sendable {
    /// How the emulator behaves.
    public struct Configuration: Sendable {
        /// The API tokens it accepts, each with its sign-in callback (nil: the token is shown for pasting).
        public var apiTokens: [String: URL?] = [CloudKitWebAuthEmulator.defaultAPIToken: nil]
        /// How long a web auth token works after it was issued.
        public var tokenLifetime: Duration = .seconds(14 * 24 * 3600)
        /// Whether only the newest token of a sign-in works (the documented rotation) rather than every unexpired
        /// one (what the live service was seen doing).
        public var singleUseTokens = false
        /// Who signs in when the sign-in page is given no `appleID`.
        public var defaultAppleID = "user@example.com"

        /// The defaults.
        public init() {}
    }

    /// The outcome of checking a call's tokens.
    public enum Check: Sendable {
        /// The tokens are valid; answer, then pass the answer through ``Grant/applying(to:)``.
        case granted(Grant)
        /// Answer this: 401 `AUTHENTICATION_FAILED`, 421 `AUTHENTICATION_REQUIRED` or 400 `BAD_REQUEST`.
        case refused(HTTPResponse)
    }

    /// Who made a call, and the token to hand back.
    public struct Grant: Sendable, Equatable {
        /// The signed-in user's record name (`_…`), or nil for a call that needed no user.
        public let userRecordName: String?
        /// The token that replaces the one the call sent, or nil when it sent none.
        public let rotatedToken: String?

        /// `response` with the rotated token in `X-Apple-CloudKit-Web-Auth-Token`.
        public func applying(to response: HTTPResponse) -> HTTPResponse {
            var response = response
            if let rotatedToken { response.headers[CloudKitWebAuthEmulator.tokenHeader] = rotatedToken }
            return response
        }
    }

    /// What the emulator keeps across restarts: signed-in sessions and their tokens.
    public struct SavedState: Sendable, Codable, Equatable {
        struct Token: Sendable, Codable, Equatable {
            var value: String
            var expiresAtMs: Int64
        }

        struct Session: Sendable, Codable, Equatable {
            var appleID: String
            var userRecordName: String
            var container: String
            var environment: String
            /// Oldest first; at most ``CloudKitWebAuthEmulator/keptTokens``.
            var tokens: [Token]
        }

        struct PendingSignIn: Sendable, Codable, Equatable {
            var apiToken: String
            var container: String
            var environment: String
            var expiresAtMs: Int64
        }

        var sessions: [Session] = []
        var pending: [String: PendingSignIn] = [:]

        /// Nobody signed in.
        public init() {}
    }

    /// The API token `cloudsync-emulator` accepts and prints.
    public static let defaultAPIToken = "cloudsync-emulator-api-token"
    /// The sign-in page's path.
    public static let signInPath = "/cloudkit/auth/signin"
    /// The header carrying the next token.
    public static let tokenHeader = "X-Apple-CloudKit-Web-Auth-Token"
    /// Tokens of one sign-in kept valid at once (a client may have several calls in flight).
    public static let keptTokens = 16

    private let clock: any StoreClock
    private let configuration: Mutex<Configuration>
    private let state = Mutex(SavedState())

    /// An emulator with `configuration`, its tokens expiring on `clock`.
    public init(configuration: Configuration = Configuration(), clock: any StoreClock = SystemClock()) {
        self.clock = clock
        self.configuration = Mutex(configuration)
    }

    /// Sets (or, with nil, removes) the sign-in callback of `apiToken`, accepting the token from now on.
    public func setSignInCallback(_ callback: URL?, for apiToken: String) {
        configuration.withLock { $0.apiTokens[apiToken] = .some(callback) }
    }

    /// Adds the sign-in page and `users/caller` to `server`.
    public func register(on server: LoopbackHTTPServer) {
        server.route(HTTPRoutePattern(stringLiteral: "GET " + Self.signInPath)) { [self] in signIn($0) }
        server.route("GET /database/1/{container}/{environment}/public/users/caller") { [self] request in
            let container = request.captures["container"] ?? ""
            let environment = request.captures["environment"] ?? ""
            switch check(request, container: container, environment: environment) {
            case .refused(let response): return response
            case .granted(let grant):
                return grant.applying(to: .json(["users": [["userRecordName": grant.userRecordName ?? ""]]]))
            }
        }
    }

    /// The endpoint on `baseURL` and the default API token, as pipeline fields name them.
    public func urls(baseURL: URL) -> [String: String] {
        var urls = ["endpoint": baseURL.absoluteString]
        let tokens = configuration.withLock { Array($0.apiTokens.keys) }
        urls["apiToken"] =
            tokens.contains(Self.defaultAPIToken) ? Self.defaultAPIToken : tokens.sorted().first
        return urls
    }

    // MARK: State

    /// Every session and pending sign-in, for saving.
    public var savedState: SavedState { state.withLock { $0 } }

    /// Replaces every session with `saved`'s.
    public func restore(_ saved: SavedState) { state.withLock { $0 = saved } }

    /// Signs `appleID` in to `container` at once, without the page: the token a sign-in would deliver.
    public func issueToken(appleID: String? = nil, container: String, environment: String) -> String {
        let appleID = appleID ?? configuration.withLock { $0.defaultAppleID }
        let token = Self.newToken()
        let expires = clock.nowMilliseconds() + configuration.withLock { $0.tokenLifetime }.milliseconds
        state.withLock { state in
            state.sessions.append(
                SavedState.Session(
                    appleID: appleID, userRecordName: Self.userRecordName(appleID, container), container: container,
                    environment: environment, tokens: [SavedState.Token(value: token, expiresAtMs: expires)]))
        }
        return token
    }

    /// Signs every session of `appleID` out: their tokens stop working.
    public func signOut(appleID: String) {
        state.withLock { $0.sessions.removeAll { $0.appleID == appleID } }
    }

    /// Makes every session of `appleID` belong to `newAppleID` from now on, tokens and all: what a client sees when the
    /// iCloud account behind its sign-in changes (`users/caller` names another user).
    public func switchAccount(of appleID: String, to newAppleID: String) {
        state.withLock { state in
            for index in state.sessions.indices where state.sessions[index].appleID == appleID {
                state.sessions[index].appleID = newAppleID
                state.sessions[index].userRecordName = Self.userRecordName(newAppleID, state.sessions[index].container)
            }
        }
    }

    /// CloudKit's user record name for `appleID` in `container`: stable, different per container, as CloudKit's are.
    public static func userRecordName(_ appleID: String, _ container: String) -> String {
        "_" + sha256Hex(container + "\n" + appleID.lowercased()).prefix(32)
    }

    // MARK: Checking calls

    /// Checks a call to `container` in `environment`: its `ckAPIToken` always, its `ckWebAuthToken` when
    /// `requiresUser` (private and shared databases, `users/caller`), rotating the token on success.
    public func check(
        _ request: ReceivedRequest, container: String, environment: String, requiresUser: Bool = true
    ) -> Check {
        guard container.hasPrefix("iCloud."), container.count > 7 else {
            return .refused(
                Self.error(400, "BAD_REQUEST", "container \(container) is not a container identifier (iCloud.…)"))
        }
        guard environment == "development" || environment == "production" else {
            return .refused(
                Self.error(400, "BAD_REQUEST", "environment must be development or production, not \(environment)"))
        }
        guard let apiToken = request.query("ckAPIToken"), configuration.withLock({ $0.apiTokens[apiToken] != nil })
        else {
            return .refused(Self.error(401, "AUTHENTICATION_FAILED", "no valid ckAPIToken was given"))
        }
        guard requiresUser else { return .granted(Grant(userRecordName: nil, rotatedToken: nil)) }
        let now = clock.nowMilliseconds()
        let (lifetime, singleUse) = configuration.withLock { ($0.tokenLifetime, $0.singleUseTokens) }
        if let sent = request.query("ckWebAuthToken"), !sent.isEmpty {
            let next = Self.newToken()
            let user = state.withLock { state -> String? in
                for index in state.sessions.indices {
                    var session = state.sessions[index]
                    guard session.container == container, session.environment == environment,
                        let position = session.tokens.firstIndex(where: { $0.value == sent }),
                        session.tokens[position].expiresAtMs > now,
                        !singleUse || position == session.tokens.count - 1
                    else { continue }
                    session.tokens.removeAll { $0.expiresAtMs <= now }
                    if singleUse { session.tokens.removeAll() }
                    session.tokens.append(SavedState.Token(value: next, expiresAtMs: now + lifetime.milliseconds))
                    session.tokens = Array(session.tokens.suffix(Self.keptTokens))
                    state.sessions[index] = session
                    return session.userRecordName
                }
                return nil
            }
            if let user { return .granted(Grant(userRecordName: user, rotatedToken: next)) }
        }
        let session = randomToken("", bytes: 18)
        state.withLock { state in
            state.pending = state.pending.filter { $0.value.expiresAtMs > now }
            state.pending[session] = SavedState.PendingSignIn(
                apiToken: apiToken, container: container, environment: environment, expiresAtMs: now + 3_600_000)
        }
        // The sign-in page on the scheme and host the call came in on, which the person's browser can reach too.
        let redirect = adding([("session", session)], to: request.origin + Self.signInPath)
        return .refused(Self.error(421, "AUTHENTICATION_REQUIRED", "request needs authorization", redirect: redirect))
    }

    /// CloudKit's error dictionary as an answer.
    public static func error(
        _ status: Int, _ code: String, _ reason: String, redirect: String? = nil, retryAfter: Int? = nil
    ) -> HTTPResponse {
        struct Body: Encodable {
            let uuid: String
            let serverErrorCode: String
            let reason: String
            let redirectURL: String?
            let retryAfter: Int?
        }
        return .json(
            Body(
                uuid: UUID().uuidString.lowercased(), serverErrorCode: code, reason: reason, redirectURL: redirect,
                retryAfter: retryAfter), status: status)
    }

    // MARK: The sign-in page

    private func signIn(_ request: ReceivedRequest) -> HTTPResponse {
        let now = clock.nowMilliseconds()
        guard let id = request.query("session"),
            let pending = state.withLock({ state in state.pending.removeValue(forKey: id) }),
            pending.expiresAtMs > now
        else {
            return htmlPage(
                400, title: "Sign-in link expired",
                [
                    "This sign-in address is unknown, used or expired. Ask CloudKit for a new one (call it again "
                        + "without a web auth token)."
                ])
        }
        let token = issueToken(
            appleID: request.query("appleID").flatMap { $0.isEmpty ? nil : $0 }, container: pending.container,
            environment: pending.environment)
        let callback = configuration.withLock { $0.apiTokens[pending.apiToken] ?? nil }
        if let callback {
            return redirect(to: adding([("ckWebAuthToken", token)], to: callback.absoluteString))
        }
        return htmlPage(
            200, title: "Signed in",
            [
                "Paste this ckWebAuthToken where CloudSync asks for it:",
                "<code id=\"ckWebAuthToken\">\(escapeHTML(token))</code>",
            ])
    }

    /// A token in CloudKit's shape: base64 with `+`, `/` and `=`, which a URL must carry percent-encoded.
    private static func newToken() -> String {
        "CK/1+" + Data(SecureRandom.bytes(count: 34)).base64EncodedString()
    }
}
