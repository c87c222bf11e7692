/// What went wrong talking to PostgreSQL: the server it concerns, what it said, and its SQLSTATE when it gave one.
///
/// Messages come from libpq and the server, which never repeat a password; the server is named by host, port and
/// database, never by its connection URL.
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the error came from.
    public enum Kind: Sendable, Equatable {
        /// The server answered but refused the connection (the login, the database, the role, too many clients).
        case connect
        /// Nothing answered: no server at that address, a firewall, a name that does not resolve, a timeout.
        case unreachable
        /// A statement failed on an open connection.
        case statement
        /// The connection was lost or closed.
        case connection
    }

    public var kind: Kind
    /// `host:port/database`.
    public var server: String
    /// The five-character SQLSTATE (`23505` unique violation, `28P01` bad password, `42501` no privilege), when the
    /// server sent one.
    public var sqlState: String?
    /// What libpq or the server said, on one line.
    public var message: String

    public init(_ kind: Kind, server: String, sqlState: String? = nil, message: String) {
        self.kind = kind
        self.server = server
        self.sqlState = sqlState
        self.message = message
    }

    public var description: String {
        "PostgreSQL at \(server): \(message)" + (sqlState.map { " (SQLSTATE \($0))" } ?? "")
    }
}
