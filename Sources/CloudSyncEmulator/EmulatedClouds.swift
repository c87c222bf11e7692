import CloudSync
import CloudSyncHTTPServer
import Foundation
import Synchronization

/// Google Drive as `cloudsync-emulator --drive` serves it: its OAuth 2.0 endpoints (``oauth``) and the Drive v3
/// API (``files``: files, uploads, batch, about, changes), which checks bearer tokens with
/// ``GoogleOAuthEmulator/authorize(_:scope:)``.
///
/// Its data file holds `{"oauth": ..., "files": ...}`; each key is optional so older files still load.
public final class DriveEmulator: EmulatorService {
    /// The OAuth 2.0 endpoints and the tokens they issued.
    public let oauth: GoogleOAuthEmulator
    /// The Drive v3 API and every user's files.
    public let files: DriveFilesEmulator

    /// Whether ``urls(baseURL:)`` carries ``demoRefreshToken`` (`cloudsync-emulator` sets it).
    public let printsDemoRefreshToken: Bool

    /// Drive over `oauth`; `files` defaults to an unlimited Drive on the system clock.
    public init(
        oauth: GoogleOAuthEmulator = GoogleOAuthEmulator(), files: DriveFilesEmulator? = nil,
        printsDemoRefreshToken: Bool = false
    ) {
        self.oauth = oauth
        self.files = files ?? DriveFilesEmulator(oauth: oauth)
        self.printsDemoRefreshToken = printsDemoRefreshToken
    }

    public var name: String { "drive" }

    public func register(on server: LoopbackHTTPServer) {
        oauth.register(on: server)
        files.register(on: server)
    }

    /// `endpoint` (the API base, as the pipeline's `endpoint`), `tokenEndpoint`, `authEndpoint`, `revokeEndpoint`,
    /// the emulator's test client (`clientId`, `clientSecret`) and, with ``printsDemoRefreshToken``,
    /// ``demoRefreshToken`` (`refreshToken`).
    public func urls(baseURL: URL) -> [String: String] {
        var urls = oauth.urls(baseURL: baseURL)
        if printsDemoRefreshToken { urls["refreshToken"] = demoRefreshToken }
        return urls
    }

    private let demoToken = Mutex<String?>(nil)

    /// A refresh token of the default client for the default user, issued the first time it is asked for and kept
    /// with the state, so an example pipeline runs against the emulator without `cloudsync login`.
    public var demoRefreshToken: String {
        demoToken.withLock { token in
            if let current = token, oauth.isActive(refreshToken: current) { return current }
            let issued = oauth.issueTokens(user: GoogleOAuthEmulator.Configuration().defaultUser).refreshToken
            token = issued
            return issued
        }
    }

    private struct Saved: Codable {
        var oauth: GoogleOAuthEmulator.SavedState?
        var files: DriveFilesEmulator.SavedState?
        var demoRefreshToken: String?
    }

    public func savedState() throws -> Data {
        try JSONEncoder.emulatorState.encode(
            Saved(oauth: oauth.savedState, files: files.savedState, demoRefreshToken: demoToken.withLock { $0 }))
    }

    public func restoreState(from data: Data) throws {
        let saved = try JSONDecoder().decode(Saved.self, from: data)
        oauth.restore(saved.oauth ?? GoogleOAuthEmulator.SavedState())
        files.restore(saved.files ?? DriveFilesEmulator.SavedState())
        demoToken.withLock { $0 = saved.demoRefreshToken }
    }
}

/// CloudKit Web Services as `cloudsync-emulator --cloudkit` serves it: its user authentication (``webAuth``) and the
/// private database's zones, records and change feed (``database``), every call checked with
/// ``CloudKitWebAuthEmulator/check(_:container:environment:requiresUser:)`` and its token rotated on every answer.
///
/// Its data file holds `{"webAuth": ..., "database": ...}`; each key is optional so older files still load. With a
/// data directory, asset bytes are files in `DIR/cloudkit-assets`.
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

    /// Keeps the database's asset bytes in `DIR/cloudkit-assets`, one file each.
    public func useDataDirectory(_ directory: String) throws {
        try database.keepAssets(in: directory + "/cloudkit-assets")
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
