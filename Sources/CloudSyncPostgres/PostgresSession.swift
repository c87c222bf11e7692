import CPostgres

/// A connection's calls made on the caller's thread, for code that cannot await: the state interfaces the outbox's
/// write path and the providers' token store use are synchronous, as SQLite's are.
///
/// A session exists only inside ``PostgresConnection/blocking(_:)``, which holds the connection's queue for the whole
/// body: statements of other callers wait, so a transaction begun in the body is the body's alone. Every statement
/// text is prepared once per connection and run as a prepared statement afterwards.
public struct PostgresSession {
    private let connection: PostgresConnection
    private let handle: OpaquePointer

    fileprivate init(connection: PostgresConnection, handle: OpaquePointer) {
        self.connection = connection
        self.handle = handle
    }

    /// `host:port/database`, as errors name the server.
    public var server: String { connection.server }

    /// Runs `sql` with `parameters` bound to `$1`, `$2`, …, prepared on the first call with this text.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresResult {
        let name: String
        if let known = connection.preparedByText[sql] {
            name = known
        } else {
            connection.prepared += 1
            name = "cloudsync_s\(connection.prepared)"
            // Parameter types come from the statement's casts and columns, as they do for a prepared statement.
            _ = try connection.read(PQprepare(handle, name, sql, 0, nil), on: handle)
            connection.preparedByText[sql] = name
        }
        return try connection.withBound(parameters) { count, _, values throws(PostgresError) in
            try connection.read(PQexecPrepared(handle, name, count, values, nil, nil, 0), on: handle)
        }
    }

    /// Runs `sql` as it is, unprepared: statements with several commands (a migration), or `BEGIN` and `COMMIT`.
    public func executeScript(_ sql: String) throws(PostgresError) {
        _ = try connection.read(PQexec(handle, sql), on: handle)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws (and the error rethrown).
    public func transaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
        try executeScript("BEGIN")
        let value: T
        do {
            value = try body()
        } catch {
            try? executeScript("ROLLBACK")
            throw error
        }
        try executeScript("COMMIT")
        return value
    }
}

extension PostgresConnection {
    /// Runs `body` with the connection on the caller's thread, holding it for the whole body.
    ///
    /// Never call it from inside another `blocking` body of the same connection: the queue is already held.
    public func blocking<T>(_ body: (PostgresSession) throws(PostgresError) -> T) throws(PostgresError) -> T {
        let result: Result<T, PostgresError> = queue.sync {
            guard let handle else {
                return .failure(PostgresError(.connection, server: server, message: "the connection is closed"))
            }
            let session = PostgresSession(connection: self, handle: handle)
            return Result { () throws(PostgresError) -> T in try body(session) }
        }
        return try result.get()
    }

    /// Ends the session on the caller's thread; later calls fail.
    public func closeBlocking() {
        queue.sync {
            if let handle { PQfinish(handle) }
            handle = nil
            preparedByText = [:]
        }
    }
}
