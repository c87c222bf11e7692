/// A provider type's one-time interactive sign-in, which `cloudsync login` runs.
///
/// Real accounts need a person once (a browser, a consent screen); a scheduled run cannot do that. A factory whose
/// providers need it returns one of these from ``ProviderFactory/signIn(for:)``: the sign-in talks to the person
/// through a ``SignInInteraction`` and returns the credentials it obtained, which the caller keeps in the provider's
/// ``ProviderState`` (for a pipeline, its state database), where the provider finds them on every later run.
///
/// The flows themselves (OAuth 2.0 for installed apps, CloudKit's web sign-in) live in `CloudSyncAuth`; the core only
/// knows this shape, so the pipeline and the command line need no provider-specific code.
public protocol ProviderSignIn: Sendable {
    /// How it signs in, for people: `Google OAuth 2.0 (installed app, PKCE, loopback redirect)`.
    var method: String { get }
    /// Every credential it can return; `cloudsync logout` forgets exactly these.
    var credentials: [StoredCredential] { get }
    /// Signs in with the person's help and returns the credentials to keep.
    ///
    /// Throws `ERR_NOT_SIGNED_IN` when the person or the server refused, `ERR_TIMEOUT` when nobody answered in time,
    /// `ERR_CANCELLED` when the task was cancelled, and the mapped HTTP errors otherwise; nothing is kept then.
    func signIn(_ interaction: SignInInteraction) async throws(CloudSyncError) -> [StoredCredential: String]
}

/// How a sign-in reaches the person: lines to show, lines they paste, and how long to wait for them.
public struct SignInInteraction: Sendable {
    /// Shows one message to the person (the address to open, a prompt); the command line writes it to standard error.
    public var show: @Sendable (String) -> Void
    /// Reads one line the person typed or pasted, without its newline; nil at the end of the input.
    ///
    /// Called on a thread of its own, so it may block.
    public var readLine: @Sendable () -> String?
    /// No browser on this machine (`--no-browser`): the person opens the address elsewhere and pastes back the
    /// address it led to, which the sign-in reads with ``readLine``.
    public var noBrowser: Bool
    /// How long to wait for the person before giving up with `ERR_TIMEOUT`.
    public var timeout: Duration
    /// Where time comes from for ``timeout``.
    public var clock: any StoreClock

    /// An interaction; by default it waits five minutes for the person.
    public init(
        show: @escaping @Sendable (String) -> Void, readLine: @escaping @Sendable () -> String? = { nil },
        noBrowser: Bool = false, timeout: Duration = .seconds(300), clock: any StoreClock = SystemClock()
    ) {
        self.show = show
        self.readLine = readLine
        self.noBrowser = noBrowser
        self.timeout = timeout
        self.clock = clock
    }
}

/// A credential a sign-in yields, kept in the provider's ``ProviderState`` under ``name``.
///
/// Equal when the names are; the names are part of the state database's contents, so never rename one.
public struct StoredCredential: Sendable, Hashable, CustomStringConvertible {
    /// The name of the provider value it is kept under.
    public let name: String
    /// What it is, for people: `OAuth refresh token`.
    public let summary: String

    /// A credential kept under `name`.
    public init(name: String, summary: String) {
        self.name = name
        self.summary = summary
    }

    /// An OAuth 2.0 refresh token (Google): exchanged for short-lived access tokens on every run.
    public static let oauthRefreshToken = StoredCredential(
        name: "signIn.oauthRefreshToken", summary: "OAuth refresh token")
    /// A CloudKit web auth token: each response carries its successor, which replaces it.
    public static let cloudKitWebAuthToken = StoredCredential(
        name: "signIn.cloudKitWebAuthToken", summary: "CloudKit web auth token")

    /// The summary.
    public var description: String { summary }

    /// Equal names.
    public static func == (a: StoredCredential, b: StoredCredential) -> Bool { a.name == b.name }

    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

extension ProviderState {
    /// The credential `cloudsync login` (or an earlier rotation) kept, or nil.
    public func credential(_ credential: StoredCredential) throws(CloudSyncError) -> String? {
        try value(credential.name)
    }

    /// Keeps `value` as `credential`, replacing the one kept before (a rotated token replaces its predecessor).
    public func replace(_ credential: StoredCredential, with value: String) throws(CloudSyncError) {
        try set(value, for: credential.name)
    }

    /// Forgets `credential`; returns whether one was kept.
    @discardableResult
    public func forget(_ credential: StoredCredential) throws(CloudSyncError) -> Bool {
        let had = try value(credential.name) != nil
        try set(nil, for: credential.name)
        return had
    }
}
