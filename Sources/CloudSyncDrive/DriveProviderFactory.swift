import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import Foundation

/// The `googleDrive` provider type: one file per key in a Google account's Drive `appDataFolder`.
public struct DriveProviderFactory: ProviderFactory {
    /// Where the credentials of a configuration come from.
    public enum Credentials: Sendable, Equatable {
        /// The pipeline's `accessToken`, used as it is and never refreshed.
        case accessToken(String)
        /// The pipeline's `refreshToken`, exchanged at the token endpoint for access tokens.
        case refreshToken(String)
        /// The refresh token `cloudsync login` keeps in the pipeline's state database.
        case storedByLogin
    }

    /// A Drive account, the client that reaches it, and the endpoints.
    public struct Configuration: Sendable {
        /// The API's base URL.
        public var endpoint: URL
        /// The OAuth client; nil when only a static access token is given.
        public var client: OAuthClientConfiguration?
        /// Where the credentials come from.
        public var credentials: Credentials
        /// Each request's deadline.
        public var timeoutMs: Int64
        /// Requests in flight at once.
        public var maxConcurrency: Int
    }

    /// The scope the provider asks for: the app data folder only.
    public static let scope = "https://www.googleapis.com/auth/drive.appdata"

    /// How requests are sent; URLSession unless a test or program gives another.
    public let transport: @Sendable (_ maxConcurrency: Int) -> any HTTPTransport

    /// The factory; register it in a `ProviderRegistry`.
    public init(
        transport: @escaping @Sendable (_ maxConcurrency: Int) -> any HTTPTransport = {
            URLSessionTransport(maxConcurrency: $0)
        }
    ) {
        self.transport = transport
    }

    /// The `type` pipeline files name.
    public var type: String { "googleDrive" }
    /// What the provider stores, and where, in one sentence.
    public var summary: String {
        "one file per key in a Google account's Drive app data folder (hidden, private to the OAuth client), over "
            + "Drive API v3"
    }

    /// The fields of this type besides the common ones.
    public var fields: [ProviderField] {
        [
            ProviderField(
                "clientId", .text,
                summary: "the OAuth client id (`….apps.googleusercontent.com`, a Desktop app client of a Google Cloud "
                    + "project with the Drive API enabled); needed unless `accessToken` is given"),
            ProviderField("clientSecret", .text, secret: true, summary: "the OAuth client's secret"),
            ProviderField(
                "refreshToken", .text, secret: true,
                summary: "a refresh token for the client; without it (and `accessToken`) the one `cloudsync login` "
                    + "stored is used"),
            ProviderField(
                "accessToken", .text, secret: true,
                summary: "a static access token, used as it is and never refreshed (short jobs and tests)"),
            ProviderField(
                "endpoint", .text, defaultValue: "https://www.googleapis.com",
                summary: "the API's base URL (the emulator's in tests and examples)"),
            ProviderField(
                "tokenEndpoint", .text, defaultValue: "https://oauth2.googleapis.com/token",
                summary: "where refresh tokens become access tokens"),
            ProviderField(
                "authEndpoint", .text, defaultValue: "https://accounts.google.com/o/oauth2/v2/auth",
                summary: "where `cloudsync login` sends the person to allow access"),
            ProviderField(
                "timeoutMs", .integer(minimum: 1, unit: "milliseconds"), defaultValue: "60000",
                summary: "each request's deadline, retries included (one request may carry an 8 MiB chunk)"),
            ProviderField(
                "maxConcurrency", .integer(minimum: 1, unit: ""), defaultValue: "8",
                summary: "requests in flight at once"),
        ]
    }

    /// The three ways to give a credential, for errors; `login` is the command that signs this provider in.
    static func credentialWays(login: String = "cloudsync login FILE --provider ID") -> String {
        "give `accessToken`, or `refreshToken` with `clientId` and `clientSecret`, or `clientId` and `clientSecret` "
            + "and run `\(login)` once to store a refresh token"
    }

    private static func url(_ values: ProviderFieldValues, _ field: String, default text: String)
        throws(ProviderConfigurationError) -> URL
    {
        let given = values.text(field) ?? text
        guard let url = URL(string: given), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host?.isEmpty == false, url.user == nil
        else {
            throw ProviderConfigurationError(field: field, "\"\(given)\" is not an http:// or https:// URL with a host")
        }
        return url
    }

    /// The typed configuration of checked field values.
    public func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        let endpoint = try Self.url(values, "endpoint", default: "https://www.googleapis.com")
        let tokenEndpoint = try Self.url(values, "tokenEndpoint", default: "https://oauth2.googleapis.com/token")
        let authEndpoint = try Self.url(
            values, "authEndpoint", default: "https://accounts.google.com/o/oauth2/v2/auth")
        let clientID = values.text("clientId").flatMap { $0.isEmpty ? nil : $0 }
        let client = clientID.map {
            OAuthClientConfiguration(
                clientID: $0, clientSecret: values.text("clientSecret"), authorizationEndpoint: authEndpoint,
                tokenEndpoint: tokenEndpoint, scopes: [Self.scope])
        }
        let credentials: Credentials
        if let token = values.text("accessToken"), !token.isEmpty {
            credentials = .accessToken(token)
        } else if let token = values.text("refreshToken"), !token.isEmpty {
            guard client != nil else {
                throw ProviderConfigurationError(
                    field: "clientId",
                    "a `refreshToken` works only with the client it was issued to: give `clientId` "
                        + "and `clientSecret`")
            }
            credentials = .refreshToken(token)
        } else {
            guard client != nil else {
                throw ProviderConfigurationError("needs a credential: \(Self.credentialWays())")
            }
            credentials = .storedByLogin
        }
        return Configuration(
            endpoint: endpoint, client: client, credentials: credentials,
            timeoutMs: values.integer("timeoutMs") ?? 60_000, maxConcurrency: Int(values.integer("maxConcurrency") ?? 8)
        )
    }

    /// What a provider of this configuration can do.
    public func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        var capabilities = DriveProvider.capabilities
        capabilities.requestsAtOnce = configuration.maxConcurrency
        return capabilities
    }

    /// Where the files go and where the credentials come from (never the token).
    public func planDetails(of configuration: Configuration) -> [String: String] {
        let client = configuration.client.map { " for client \($0.clientID)" } ?? ""
        let credentials: String
        switch configuration.credentials {
        case .accessToken: credentials = "the static `accessToken` of the pipeline (never refreshed)"
        case .refreshToken:
            credentials =
                "the pipeline's `refreshToken`\(client), exchanged at "
                + "\(configuration.client?.tokenEndpoint.absoluteString ?? "")"
        case .storedByLogin:
            credentials =
                "the refresh token `cloudsync login` stores in the state database\(client), exchanged at "
                + "\(configuration.client?.tokenEndpoint.absoluteString ?? "")"
        }
        return [
            "credentials": credentials,
            "files": "\(configuration.endpoint.absoluteString)/drive/v3 app data folder (scope drive.appdata)",
        ]
    }

    /// `cloudsync login`'s flow: OAuth for installed apps against the configured client; nil without `clientId`.
    public func signIn(for configuration: Configuration) -> (any ProviderSignIn)? {
        guard let client = configuration.client else { return nil }
        return InstalledAppSignIn(client: client, transport: transport(1))
    }

    /// Makes the provider: picks the credential (an error names the three ways when there is none) and opens no
    /// connection until the first call.
    public func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        let transport = transport(configuration.maxConcurrency)
        var context = context
        let authenticator: any HTTPAuthenticator
        let advice = "run `\(context.loginCommand)` to sign in again"
        switch configuration.credentials {
        case .accessToken(let token):
            context.logger = context.logger.redacting([token])
            authenticator = StaticBearerToken(token: token)
        case .refreshToken(let token):
            context.logger = context.logger.redacting([token])
            authenticator = OAuthAccessTokens(
                client: OAuthTokenClient(
                    configuration: configuration.client!, transport: transport, clock: context.clock),
                refreshToken: token, clock: context.clock, signInAdvice: advice)
        case .storedByLogin:
            guard let token = try context.state.credential(.oauthRefreshToken), let client = configuration.client else {
                throw CloudSyncError(
                    .notSignedIn,
                    "no Google sign-in is stored for \(context.providerID): \(Self.credentialWays(login: context.loginCommand))",
                    provider: context.providerID)
            }
            context.logger = context.logger.redacting([token])
            authenticator = OAuthAccessTokens(
                client: OAuthTokenClient(configuration: client, transport: transport, clock: context.clock),
                refreshToken: token, clock: context.clock, signInAdvice: advice)
        }
        if let secret = configuration.client?.clientSecret { context.logger = context.logger.redacting([secret]) }
        return DriveProvider(
            endpoint: configuration.endpoint, authenticator: authenticator, transport: transport, context: context,
            timeout: .milliseconds(configuration.timeoutMs), maxConcurrency: configuration.maxConcurrency,
            readOnly: context.readOnly)
    }
}
