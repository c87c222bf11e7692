import CloudSync
import CloudSyncAuth
import CloudSyncDrive
import CloudSyncHTTP
import CloudSyncTesting
import Foundation

/// The Drive emulator in-process on 127.0.0.1 and a free port: OAuth and the files API, its times on `clock`; over
/// HTTPS with `tls` (its CA certificate in `caFile`).
final class DriveHost: Sendable {
    let server: EmulatorServer
    let drive: DriveEmulator
    let clock: ManualClock

    init(
        storageLimitBytes: Int64? = nil, accessTokenLifetime: Duration = .seconds(3599),
        nameOrder: DriveFilesEmulator.NameOrder = .bytes, tls: Bool = false
    ) throws {
        clock = ManualClock()
        var configuration = GoogleOAuthEmulator.Configuration()
        configuration.accessTokenLifetime = accessTokenLifetime
        let oauth = GoogleOAuthEmulator(configuration: configuration, clock: clock)
        drive = DriveEmulator(
            oauth: oauth,
            files: DriveFilesEmulator(
                oauth: oauth, configuration: .init(storageLimitBytes: storageLimitBytes, nameOrder: nameOrder),
                clock: clock))
        server = try EmulatorServer(services: [drive], tls: tls)
    }

    deinit { try? server.stop() }

    var endpoint: URL { server.baseURL }
    /// The CA certificate a client trusts to reach a host made with `tls`.
    var caFile: String? { server.caFile }
    var files: DriveFilesEmulator { drive.files }
    /// The Drive API's requests (not the token endpoint's).
    var log: [HTTPLogEntry] { server.server.requestLog.filter { $0.path != "/token" } }
    /// The token endpoint's requests.
    var tokenRequests: Int { server.server.requestLog.filter { $0.path == "/token" }.count }

    /// Requests logged since the last `clearLog()` whose method and path match.
    func count(_ method: String, _ path: String, query: String? = nil) -> Int {
        log.filter { entry in
            entry.method == method && entry.path == path
                && (query.map { name in entry.queryItems.contains { $0.name == name } } ?? true)
        }.count
    }

    func clearLog() { server.server.clearLog() }

    /// A fresh user with a refresh token (and an access token) for the emulator's default client.
    func signIn(_ user: String = "user-\(UUID().uuidString.prefix(8))@example.com")
        -> (user: String, refreshToken: String, accessToken: String)
    {
        let tokens = drive.oauth.issueTokens(user: user)
        return (user, tokens.refreshToken, tokens.accessToken)
    }

    var client: OAuthClientConfiguration {
        OAuthClientConfiguration(
            clientID: GoogleOAuthEmulator.Client.emulatorDefault.id,
            clientSecret: GoogleOAuthEmulator.Client.emulatorDefault.secret,
            authorizationEndpoint: server.baseURL.appendingPathComponent("o/oauth2/v2/auth"),
            tokenEndpoint: server.baseURL.appendingPathComponent("token"), scopes: [DriveProviderFactory.scope])
    }

    /// A provider signed in with `refreshToken` (a fresh user's by default), retrying quickly.
    func provider(
        refreshToken: String? = nil, id: String = "drive", state: ProviderState? = nil, chunkSize: Int = 262_144,
        maxAttempts: Int = 4, metrics: ProviderMetrics = ProviderMetrics(), clock: any StoreClock = SystemClock(),
        changePollInterval: Duration? = nil
    ) -> DriveProvider {
        let token = refreshToken ?? signIn().refreshToken
        let transport = URLSessionTransport(maxConcurrency: 8)
        let context = ProviderContext(
            providerID: id, clock: clock,
            state: state ?? ProviderState(provider: id, store: InMemoryProviderStateStore()), metrics: metrics)
        let tokens = OAuthAccessTokens(
            client: OAuthTokenClient(configuration: client, transport: transport), refreshToken: token,
            signInAdvice: "run `cloudsync login FILE --provider \(id)` to sign in again")
        return DriveProvider(
            endpoint: endpoint, authenticator: tokens, transport: transport, context: context, timeout: .seconds(60),
            maxConcurrency: 8,
            retryPolicy: RetryPolicy(
                maxAttempts: maxAttempts, baseDelay: .milliseconds(5), maxDelay: .milliseconds(50)),
            chunkSize: chunkSize, changePollInterval: changePollInterval)
    }
}

func values(_ results: [Result<String?, CloudSyncError>]) throws -> [String?] { try results.map { try $0.get() } }

func succeeded(_ results: [Result<Void, CloudSyncError>]) -> Bool {
    results.allSatisfy { if case .success = $0 { true } else { false } }
}
