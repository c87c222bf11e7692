import CloudSync
import CloudSyncHTTPServer
import Foundation

/// Google Drive as `cloudsync-emulator --drive` serves it: for now its OAuth 2.0 endpoints (``oauth``); the Drive
/// v3 files API joins it here, checking bearer tokens with ``GoogleOAuthEmulator/authorize(_:scope:)``.
///
/// Its data file holds `{"oauth": ...}`; a part added later adds its own key, optional so older files still load.
public final class DriveEmulator: EmulatorService {
    /// The OAuth 2.0 endpoints and the tokens they issued.
    public let oauth: GoogleOAuthEmulator

    /// Drive over `oauth`.
    public init(oauth: GoogleOAuthEmulator = GoogleOAuthEmulator()) {
        self.oauth = oauth
    }

    public var name: String { "drive" }

    public func register(on server: LoopbackHTTPServer) {
        oauth.register(on: server)
    }

    /// `endpoint` (the API base, as the pipeline's `endpoint`), `tokenEndpoint`, `authEndpoint`, `revokeEndpoint`,
    /// and the emulator's test client: `clientId`, `clientSecret`.
    public func urls(baseURL: URL) -> [String: String] { oauth.urls(baseURL: baseURL) }

    private struct Saved: Codable {
        var oauth: GoogleOAuthEmulator.SavedState?
    }

    public func savedState() throws -> Data {
        try JSONEncoder.emulatorState.encode(Saved(oauth: oauth.savedState))
    }

    public func restoreState(from data: Data) throws {
        let saved = try JSONDecoder().decode(Saved.self, from: data)
        oauth.restore(saved.oauth ?? GoogleOAuthEmulator.SavedState())
    }
}

/// CloudKit Web Services as `cloudsync-emulator --cloudkit` serves it: its user authentication (``webAuth``) and the
/// private database's zones, records and change feed (``database``), every call checked with
/// ``CloudKitWebAuthEmulator/check(_:container:environment:requiresUser:)`` and its token rotated on every answer.
///
/// Its data file holds `{"webAuth": ..., "database": ...}`; each key is optional so older files still load.
public final class CloudKitEmulator: EmulatorService {
    /// API tokens, the sign-in page, web auth tokens and `users/caller`.
    public let webAuth: CloudKitWebAuthEmulator
    /// Zones, records and the change feed of each user's private database.
    public let database: CloudKitDatabaseEmulator

    /// CloudKit over `webAuth`, its database's timestamps from `clock`.
    public init(webAuth: CloudKitWebAuthEmulator = CloudKitWebAuthEmulator(), clock: any StoreClock = SystemClock()) {
        self.webAuth = webAuth
        database = CloudKitDatabaseEmulator(webAuth: webAuth, clock: clock)
    }

    public var name: String { "cloudkit" }

    public func register(on server: LoopbackHTTPServer) {
        webAuth.register(on: server)
        database.register(on: server)
    }

    /// `endpoint` (as the pipeline's `endpoint`) and the emulator's test `apiToken`.
    public func urls(baseURL: URL) -> [String: String] { webAuth.urls(baseURL: baseURL) }

    private struct Saved: Codable {
        var webAuth: CloudKitWebAuthEmulator.SavedState?
        var database: CloudKitDatabaseEmulator.SavedState?
    }

    public func savedState() throws -> Data {
        try JSONEncoder.emulatorState.encode(Saved(webAuth: webAuth.savedState, database: database.savedState))
    }

    public func restoreState(from data: Data) throws {
        let saved = try JSONDecoder().decode(Saved.self, from: data)
        webAuth.restore(saved.webAuth ?? CloudKitWebAuthEmulator.SavedState())
        database.restore(saved.database ?? CloudKitDatabaseEmulator.SavedState())
    }
}

extension JSONEncoder {
    /// Data files: sorted and indented, so they diff and read well.
    static var emulatorState: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
