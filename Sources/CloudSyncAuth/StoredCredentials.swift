import CloudSync
import CloudSyncHTTP
import Foundation
import Synchronization

/// Bearer access tokens from a refresh token, for a provider's `AuthLayer`: refreshed before they expire and once
/// after an HTTP 401, one refresh at a time however many requests wait for it.
///
/// A refused refresh token (`invalid_grant`: revoked, expired, or from another client) is `ERR_NOT_SIGNED_IN` with
/// `signInAdvice`, which names the command that signs in again.
public final class OAuthAccessTokens: HTTPAuthenticator {
    private struct Current {
        var token: String
        var expiresAtMilliseconds: Int64?
    }

    private struct State {
        var current: Current?
        var refreshing: Task<Current, any Error>?
    }

    private let client: OAuthTokenClient
    private let refreshToken: String
    private let clock: any StoreClock
    /// What to do when the refresh token is refused, for messages.
    public let signInAdvice: String?
    private let state = Mutex(State())

    /// Access tokens for `refreshToken` from `client`'s token endpoint; a token is renewed a minute before it
    /// expires on `clock`.
    public init(
        client: OAuthTokenClient, refreshToken: String, clock: any StoreClock = SystemClock(),
        signInAdvice: String = "sign in again with `cloudsync login`"
    ) {
        self.client = client
        self.refreshToken = refreshToken
        self.clock = clock
        self.signInAdvice = signInAdvice
    }

    /// Adds `Authorization: Bearer …`, getting a token first when there is none or it is about to expire.
    public func authorize(_ request: inout HTTPRequest) async throws {
        let now = clock.nowMilliseconds()
        let current = state.withLock { $0.current }
        let token: Current
        if let current, current.expiresAtMilliseconds.map({ $0 - 60_000 > now }) ?? true {
            token = current
        } else {
            token = try await renew(replacing: current?.token)
        }
        request.headers["Authorization"] = "Bearer \(token.token)"
    }

    /// Renews the token after a 401; throws `ERR_NOT_SIGNED_IN` when the refresh token itself is refused.
    public func refresh(after response: HTTPResponse) async throws -> Bool {
        let stale = state.withLock { $0.current?.token }
        _ = try await renew(replacing: stale)
        return true
    }

    /// One refresh shared by every caller that found `stale` (nil: no token yet) wanting.
    private func renew(replacing stale: String?) async throws -> Current {
        enum Plan {
            case use(Current)
            case await(Task<Current, any Error>)
        }
        let plan = state.withLock { state -> Plan in
            if let refreshing = state.refreshing { return .await(refreshing) }
            // Another caller renewed it since this one looked.
            if let current = state.current, current.token != stale { return .use(current) }
            let client = self.client
            let refreshToken = self.refreshToken
            let clock = self.clock
            let advice = signInAdvice
            let task = Task { () throws -> Current in
                do {
                    let granted = try await client.refresh(refreshToken)
                    return Current(
                        token: granted.accessToken,
                        expiresAtMilliseconds: granted.expiresIn.map { clock.nowMilliseconds() + Int64($0) * 1000 })
                } catch let error as CloudSyncError {
                    guard error.code == .notSignedIn else { throw error }
                    throw error.restated(.notSignedIn, error.message + (advice.map { "; \($0)" } ?? ""))
                }
            }
            state.refreshing = task
            return .await(task)
        }
        let task: Task<Current, any Error>
        switch plan {
        case .use(let current): return current
        case .await(let waiting): task = waiting
        }
        do {
            let renewed = try await task.value
            state.withLock { state in
                state.current = renewed
                state.refreshing = nil
            }
            return renewed
        } catch {
            state.withLock { $0.refreshing = nil }
            throw error
        }
    }
}

/// The CloudKit web auth token a provider sends, kept current: every answer's `X-Apple-CloudKit-Web-Auth-Token`
/// replaces it, in memory and in the provider's state, before the next request goes out.
///
/// CloudKit documents each token as good for one round trip, its successor arriving with the answer; in practice the
/// old one has been seen to keep working. Keeping the newest is right either way.
public final class CloudKitWebAuthToken: Sendable {
    /// The answer header carrying the next token.
    public static let header = "X-Apple-CloudKit-Web-Auth-Token"

    private let state: ProviderState
    private let current: Mutex<String?>

    /// The token `cloudsync login` (or the last rotation) kept in `state`, else `fallback` (one given in the pipeline).
    public init(state: ProviderState, fallback: String? = nil) throws(CloudSyncError) {
        self.state = state
        current = Mutex(try state.credential(.cloudKitWebAuthToken) ?? fallback)
    }

    /// The token to send next, or nil when there is none (the caller must sign in).
    public var value: String? { current.withLock { $0 } }

    /// `url` with `ckAPIToken` and `ckWebAuthToken` added, percent-encoded so the token's `+`, `/` and `=` survive.
    public func authorizing(_ url: URL, apiToken: String) -> URL {
        var items = [("ckAPIToken", apiToken)]
        if let value { items.append(("ckWebAuthToken", value)) }
        return appendingQuery(url, items)
    }

    /// Keeps the token `response` carries, if any, as the one to send next; returns whether it did.
    @discardableResult
    public func rotate(from response: HTTPResponse) throws(CloudSyncError) -> Bool {
        guard let next = response.headers[Self.header], !next.isEmpty else { return false }
        let changed = current.withLock { value -> Bool in
            defer { value = next }
            return value != next
        }
        if changed { try state.replace(.cloudKitWebAuthToken, with: next) }
        return true
    }
}
