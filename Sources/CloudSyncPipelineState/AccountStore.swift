import CloudSync
import CloudSyncPipeline
import CloudSyncSQLite
import Foundation

/// The credentials `cloudsync login --account NAME` keeps for a person rather than for one pipeline: a SQLite file,
/// `accounts.db` (mode 0600, in a 0700 directory), that every pipeline whose provider says `account: NAME` reads
/// its sign-in from.
///
/// Only sign-in credentials live here (`StoredCredential` names); what a provider learns about its account
/// (identity, cursors) stays in each pipeline's state, so account-change safety is per pipeline as before. An
/// account remembers the provider type it was signed in for, and a provider of another type is refused its
/// credentials.
public final class AccountStore: Sendable {
    /// One account as `cloudsync accounts list` shows it: never a credential's value.
    public struct Account: Sendable, Equatable {
        public var name: String
        /// The provider type it was signed in for.
        public var type: String
        /// What is kept, by credential name.
        public var credentials: [String]
        /// When a credential last changed (a sign-in, or a rotated token), in milliseconds since the epoch.
        public var updatedAtMilliseconds: Int64
    }

    /// The file's path.
    public let path: String
    private let database: SQLiteDatabase
    private let readOnly: Bool

    static let migrations = SQLiteMigrator([
        SQLiteMigration(
            "create account credentials",
            sql: """
                CREATE TABLE account_credentials (
                    account TEXT NOT NULL,
                    provider_type TEXT NOT NULL,
                    name TEXT NOT NULL,
                    value TEXT NOT NULL,
                    updated_at_ms INTEGER NOT NULL,
                    PRIMARY KEY (account, name)
                ) WITHOUT ROWID;
                """)
    ])

    /// The accounts file this environment names, when it exists; nil when nothing was ever signed in there.
    public static func existing(environment: [String: String]) throws(CloudSyncError) -> AccountStore? {
        guard let directory = NamedAccounts.directory(environment: environment),
            FileManager.default.fileExists(atPath: directory + "/accounts.db")
        else { return nil }
        return try AccountStore(directory: directory, create: false)
    }

    /// Opens (creating it, and its directory, when `create` is true) the accounts file in `directory`; `readOnly`
    /// (a dry run) opens an existing file without write access, so it stays byte for byte as it was.
    public init(directory: String, create: Bool, readOnly: Bool = false) throws(CloudSyncError) {
        path = directory + "/accounts.db"
        self.readOnly = readOnly
        do {
            if create {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } else if !FileManager.default.fileExists(atPath: path) {
                throw CloudSyncError(
                    .notSignedIn,
                    "no account was ever signed in here: \(path) does not exist; sign one in with cloudsync login "
                        + "FILE --provider ID --account NAME")
            }
            database = try SQLiteDatabase(
                path: path, options: SQLiteDatabase.Options(writeAheadLog: false, readOnly: readOnly && !create))
            if !readOnly || create { try Self.migrations.migrate(database) }
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(.config, "cannot open the accounts file \(path): \(describeFileError(error))")
        }
    }

    /// The provider type `account` was signed in for, or nil when nothing is kept for it.
    public func type(of account: String) throws(CloudSyncError) -> String? {
        try run { db in
            try db.query("SELECT provider_type FROM account_credentials WHERE account = ? LIMIT 1", [account]) {
                $0.string(0)
            }.first ?? nil
        }
    }

    /// The credential `name` of `account`, or nil.
    public func value(account: String, name: String) throws(CloudSyncError) -> String? {
        try run { db in
            try db.query("SELECT value FROM account_credentials WHERE account = ? AND name = ?", [account, name]) {
                $0.string(0)
            }.first ?? nil
        }
    }

    /// Keeps `value` as the credential `name` of `account`, signed in for a provider of `type` (nil forgets it).
    ///
    /// An account holds the credentials of one provider type: keeping one for another type fails with `ERR_CONFIG`.
    public func setValue(_ value: String?, account: String, type: String, name: String) throws(CloudSyncError) {
        if let kept = try self.type(of: account), kept != type {
            throw Self.mismatch(account, kept: kept, type: type)
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try run { db in
            if let value {
                try db.execute(
                    "INSERT OR REPLACE INTO account_credentials (account, provider_type, name, value, updated_at_ms) "
                        + "VALUES (?, ?, ?, ?, ?)", account, type, name, value, now)
            } else {
                try db.execute("DELETE FROM account_credentials WHERE account = ? AND name = ?", account, name)
            }
        }
    }

    /// Every account, by name.
    public func accounts() throws(CloudSyncError) -> [Account] {
        let rows = try run { db in
            try db.query(
                "SELECT account, provider_type, name, updated_at_ms FROM account_credentials ORDER BY account, name"
            ) { ($0.string(0) ?? "", $0.string(1) ?? "", $0.string(2) ?? "", $0.int64(3)) }
        }
        var accounts: [Account] = []
        for (name, type, credential, updated) in rows {
            if accounts.last?.name == name {
                accounts[accounts.count - 1].credentials.append(credential)
                accounts[accounts.count - 1].updatedAtMilliseconds = max(
                    accounts[accounts.count - 1].updatedAtMilliseconds, updated)
            } else {
                accounts.append(
                    Account(name: name, type: type, credentials: [credential], updatedAtMilliseconds: updated))
            }
        }
        return accounts
    }

    /// Forgets every credential of `account`; returns whether it had any.
    @discardableResult
    public func remove(_ account: String) throws(CloudSyncError) -> Bool {
        try run { db in
            try db.execute("DELETE FROM account_credentials WHERE account = ?", account)
            return db.changes > 0
        }
    }

    static func mismatch(_ account: String, kept: String, type: String) -> CloudSyncError {
        CloudSyncError(
            .config,
            "account '\(account)' holds the sign-in of a \(kept) provider, not a \(type) one; give this provider an "
                + "account of its own (account: NAME, then cloudsync login FILE --provider ID --account NAME)")
    }

    private func run<T>(_ body: (SQLiteConnection) throws -> T) throws(CloudSyncError) -> T {
        do {
            return readOnly ? try database.read(body) : try database.write(body)
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(.config, "the accounts file \(path) failed: \(error)")
        }
    }
}

/// A provider's state when it signs in with a named account: its sign-in credentials are the account's, read and
/// replaced (a rotated token) there; every other value it keeps stays in the pipeline's own state.
package struct AccountProviderStateStore: ProviderStateStore {
    let accounts: AccountStore
    let account: String
    let type: String
    let pipeline: any ProviderStateStore

    package init(accounts: AccountStore, account: String, type: String, pipeline: any ProviderStateStore) {
        self.accounts = accounts
        self.account = account
        self.type = type
        self.pipeline = pipeline
    }

    private func isCredential(_ name: String) -> Bool { name.hasPrefix("signIn.") }

    package func value(provider: String, name: String) throws(CloudSyncError) -> String? {
        guard isCredential(name) else { return try pipeline.value(provider: provider, name: name) }
        if let kept = try accounts.type(of: account), kept != type {
            throw AccountStore.mismatch(account, kept: kept, type: type)
        }
        return try accounts.value(account: account, name: name)
    }

    package func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError) {
        guard isCredential(name) else { return try pipeline.setValue(value, provider: provider, name: name) }
        try accounts.setValue(value, account: account, type: type, name: name)
    }
}
