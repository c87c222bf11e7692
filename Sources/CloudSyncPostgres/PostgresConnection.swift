import CPostgres
import Dispatch
import Foundation

/// One session with a PostgreSQL server, through libpq.
///
/// Every libpq call runs on the connection's own serial queue, so a caller awaits it without holding a thread of the
/// concurrency pool, and calls from several tasks run one after another in the order they came. One connection is one
/// session: its advisory locks and its transaction belong to it, and closing it (or losing it) releases them.
/// Parameters are always bound (`$1`, `$2`, …), never spliced into the statement's text.
public final class PostgresConnection: @unchecked Sendable {
    /// `host:port/database`, as errors name the server.
    public let server: String
    /// libpq's connection; touched only on `queue`.
    var handle: OpaquePointer?
    let queue: DispatchQueue
    /// Statements prepared so far, to name the next one; touched only on `queue`.
    var prepared = 0
    /// The name each statement text was prepared under by ``PostgresSession``; touched only on `queue`.
    var preparedByText: [String: String] = [:]

    private init(handle: OpaquePointer, server: String, queue: DispatchQueue) {
        self.handle = handle
        self.server = server
        self.queue = queue
    }

    /// Connects with a libpq connection string or URL (`postgresql://user:password@host:port/database`); the error
    /// of a refused or unreachable server names it by host, port and database, never by the URL.
    ///
    /// Unless the URL says otherwise, connecting gives up after 10 seconds and the session is named `cloudsync` in
    /// `pg_stat_activity`. A server that does not answer is ``PostgresError/Kind/unreachable``; one that answers but
    /// refuses the login, the database or the role is ``PostgresError/Kind/connect``.
    public static func connect(_ url: String) async throws(PostgresError) -> PostgresConnection {
        let queue = DispatchQueue(label: "cloudsync.postgres")
        let result: Result<PostgresConnection, PostgresError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Result { () throws(PostgresError) in try open(url, queue) }) }
        }
        return try result.get()
    }

    /// ``connect(_:)`` on the caller's thread, for callers that cannot await (the synchronous state interfaces).
    public static func connectBlocking(_ url: String) throws(PostgresError) -> PostgresConnection {
        try open(url, DispatchQueue(label: "cloudsync.postgres"))
    }

    /// libpq's defaults first, so whatever the URL sets wins: it is expanded where `dbname` stands.
    private static func open(_ url: String, _ queue: DispatchQueue) throws(PostgresError) -> PostgresConnection {
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = ["10", "cloudsync", url]
        let handle: OpaquePointer? = withCStrings(keywords) { keywords in
            withCStrings(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let handle else {
            throw PostgresError(.connect, server: "?", message: "libpq could not allocate a connection")
        }
        let server = describe(handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.oneLine(PQerrorMessage(handle))
            PQfinish(handle)
            // Whether anything answered decides the kind: libpq gives a failed connection no SQLSTATE.
            let ping = withCStrings(keywords) { keywords in
                withCStrings(values) { values in PQpingParams(keywords, values, 1) }
            }
            let kind: PostgresError.Kind = ping == PQPING_OK ? .connect : .unreachable
            throw PostgresError(kind, server: server, message: message)
        }
        // libpq prints the server's notices (NOTICE: relation … already exists) on standard error by default; a
        // library says nothing there.
        _ = PQsetNoticeProcessor(handle, { _, _ in }, nil)
        return PostgresConnection(handle: handle, server: server, queue: queue)
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Runs `sql` with `parameters` bound to `$1`, `$2`, …; a statement the server refuses is an error carrying its
    /// SQLSTATE.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = []) async throws(PostgresError)
        -> PostgresResult
    {
        try await onQueue { handle throws(PostgresError) in
            try self.withBound(parameters) { count, types, values throws(PostgresError) in
                try self.read(PQexecParams(handle, sql, count, types, values, nil, nil, 0), on: handle)
            }
        }
    }

    /// Prepares `sql` once on the server, to run many times with different parameters.
    public func prepare(_ sql: String) async throws(PostgresError) -> PostgresStatement {
        let name: String = try await onQueue { handle throws(PostgresError) in
            self.prepared += 1
            let name = "cloudsync_\(self.prepared)"
            _ = try self.read(PQprepare(handle, name, sql, 0, nil), on: handle)
            return name
        }
        return PostgresStatement(connection: self, name: name)
    }

    /// Runs a prepared statement.
    func execute(prepared name: String, _ parameters: [PostgresValue]) async throws(PostgresError) -> PostgresResult {
        try await onQueue { handle throws(PostgresError) in
            try self.withBound(parameters) { count, _, values throws(PostgresError) in
                try self.read(PQexecPrepared(handle, name, count, values, nil, nil, 0), on: handle)
            }
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws (and the error rethrown).
    ///
    /// Nothing else should use the connection meanwhile: its statements would join the transaction.
    public func transaction<T: Sendable>(_ body: () async throws(PostgresError) -> T) async throws(PostgresError) -> T {
        try await execute("BEGIN")
        let value: T
        do {
            value = try await body()
        } catch {
            _ = try? await execute("ROLLBACK")
            throw error
        }
        try await execute("COMMIT")
        return value
    }

    /// Whether the session is still open and usable.
    public var isOpen: Bool {
        get async {
            await withCheckedContinuation { continuation in
                queue.async {
                    continuation.resume(returning: self.handle.map { PQstatus($0) == CONNECTION_OK } ?? false)
                }
            }
        }
    }

    /// Ends the session (releasing its advisory locks and rolling back an open transaction); later calls fail.
    public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                if let handle = self.handle { PQfinish(handle) }
                self.handle = nil
                continuation.resume()
            }
        }
    }

    // MARK: libpq, on the queue

    /// Runs `work` with the open handle on the connection's queue.
    private func onQueue<T: Sendable>(_ work: @escaping @Sendable (OpaquePointer) throws(PostgresError) -> T)
        async throws(PostgresError) -> T
    {
        let result: Result<T, PostgresError> = await withCheckedContinuation { continuation in
            queue.async {
                guard let handle = self.handle else {
                    continuation.resume(
                        returning: .failure(
                            PostgresError(.connection, server: self.server, message: "the connection is closed")))
                    return
                }
                continuation.resume(returning: Result { () throws(PostgresError) -> T in try work(handle) })
            }
        }
        return try result.get()
    }

    /// Calls `body` with `parameters` as libpq takes them: count, type OIDs and NUL-terminated texts (nil for NULL).
    func withBound<T>(
        _ parameters: [PostgresValue],
        _ body: (Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?) throws(PostgresError) -> T
    ) throws(PostgresError) -> T {
        let types = parameters.map(\.typeOID)
        let texts: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.textFormat.map { strdup($0) } ?? nil }
        defer { for text in texts { free(text) } }
        let values = texts.map { UnsafePointer($0) }
        let outcome: Result<T, PostgresError> = types.withUnsafeBufferPointer { typeBuffer in
            values.withUnsafeBufferPointer { valueBuffer in
                Result { () throws(PostgresError) -> T in
                    try body(Int32(parameters.count), typeBuffer.baseAddress, valueBuffer.baseAddress)
                }
            }
        }
        return try outcome.get()
    }

    /// The rows of `result`, or the error it carries; frees it.
    func read(_ result: OpaquePointer?, on handle: OpaquePointer) throws(PostgresError) -> PostgresResult {
        guard let result else {
            throw PostgresError(
                PQstatus(handle) == CONNECTION_OK ? .statement : .connection, server: server,
                message: Self.oneLine(PQerrorMessage(handle)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(
                PQstatus(handle) == CONNECTION_OK ? .statement : .connection, server: server, sqlState: state,
                message: Self.oneLine(PQresultErrorMessage(result)))
        }
        let columnCount = PQnfields(result)
        let rowCount = PQntuples(result)
        var columns: [String] = []
        var types: [UInt32] = []
        for column in 0..<columnCount {
            columns.append(PQfname(result, column).map { String(cString: $0) } ?? "")
            types.append(PQftype(result, column))
        }
        var rows: [[PostgresValue]] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [PostgresValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) != 0 {
                    values.append(.null)
                } else {
                    let length = Int(PQgetlength(result, row, column))
                    let text = PQgetvalue(result, row, column).map { pointer in
                        pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
                            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                        }
                    }
                    values.append(PostgresValue(text: text ?? "", typeOID: types[Int(column)]))
                }
            }
            rows.append(values)
        }
        let affected = PQcmdTuples(result).map { Int(String(cString: $0)) ?? 0 } ?? 0
        return PostgresResult(columns: columns, rows: rows, affectedRows: affected)
    }

    /// libpq's message, its lines joined: errors are shown on one line.
    static func oneLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "no message" }
        return String(cString: message).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: "; ")
    }
}

/// Calls `body` with `strings` as a NULL-terminated array of C strings, as libpq's `…Params` calls take them.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// `host:port/database` of a connection, from what libpq parsed out of its connection string.
private func describe(_ handle: OpaquePointer) -> String {
    let host = PQhost(handle).map { String(cString: $0) } ?? "?"
    let port = PQport(handle).map { String(cString: $0) } ?? "?"
    let database = PQdb(handle).map { String(cString: $0) } ?? "?"
    return "\(host):\(port)/\(database)"
}

/// A statement prepared on one connection, run with parameters bound each time.
public struct PostgresStatement: Sendable {
    let connection: PostgresConnection
    let name: String

    /// Runs it with `parameters` bound to `$1`, `$2`, ….
    @discardableResult
    public func execute(_ parameters: [PostgresValue] = []) async throws(PostgresError) -> PostgresResult {
        try await connection.execute(prepared: name, parameters)
    }
}
