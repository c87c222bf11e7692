import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

/// One throwaway PostgreSQL server for the whole test process (or the one `CLOUDSYNC_TEST_POSTGRES_URL` names).
enum SharedPostgres {
    static func server() async throws -> PostgresServer { try await PostgresServer.shared() }
}

/// The libpq face against a real server: typed binding both ways, prepared statements, SQLSTATEs, what a refused
/// login says, and advisory locks that end with their session.
@Suite(.timeLimit(.minutes(5))) struct PostgresConnectionTests {
    /// A table of this test's own, so tests sharing the server never meet.
    func table(_ connection: PostgresConnection) async throws -> String {
        let name = "t_" + UUID().uuidString.prefix(8).lowercased()
        try await connection.execute(
            "CREATE TABLE \(name) (id bigint PRIMARY KEY, name text, data bytea, flag boolean, ratio float8)")
        return name
    }

    @Test func everyTypeRoundTripsThroughAPreparedStatement() async throws {
        let connection = try await PostgresConnection.connect(try await SharedPostgres.server().url)
        let table = try await table(connection)
        let insert = try await connection.prepare("INSERT INTO \(table) VALUES ($1, $2, $3, $4, $5)")
        let awkward = "Zoë's \"quoted\" \\ back'slash; DROP TABLE \(table); -- ✓"
        let bytes = (0...255).map(UInt8.init)
        #expect(
            try await insert.execute([.integer(1), .text(awkward), .bytes(bytes), .boolean(true), .double(0.25)])
                .affectedRows == 1)
        try await insert.execute([.integer(Int64.max), .null, .bytes([]), .boolean(false), .null])
        let rows = try await connection.execute(
            "SELECT id, name, data, flag, ratio FROM \(table) WHERE id = ANY($1::bigint[]) ORDER BY id",
            [.text("{1,\(Int64.max)}")])
        #expect(rows.columns == ["id", "name", "data", "flag", "ratio"])
        #expect(
            rows.rows == [
                [.integer(1), .text(awkward), .bytes(bytes), .boolean(true), .double(0.25)],
                [.integer(Int64.max), .null, .bytes([]), .boolean(false), .null],
            ])
        await connection.close()
    }

    @Test func aRefusedStatementCarriesItsSQLStateAndTheConnectionGoesOn() async throws {
        let connection = try await PostgresConnection.connect(try await SharedPostgres.server().url)
        let table = try await table(connection)
        try await connection.execute("INSERT INTO \(table) (id) VALUES ($1)", [.integer(7)])
        await #expect {
            try await connection.execute("INSERT INTO \(table) (id) VALUES ($1)", [.integer(7)])
        } throws: { error in
            let error = error as? PostgresError
            return error?.sqlState == "23505" && error?.kind == .statement && error?.message.contains(table) == true
        }
        await #expect {
            try await connection.execute("SELEC 1")
        } throws: { ($0 as? PostgresError)?.sqlState == "42601" }
        #expect(try await connection.execute("SELECT count(*) AS n FROM \(table)").value("n") == .integer(1))
        await connection.close()
        await #expect {
            try await connection.execute("SELECT 1")
        } throws: { ($0 as? PostgresError)?.kind == .connection }
    }

    @Test func aTransactionThatThrowsLeavesNothing() async throws {
        let connection = try await PostgresConnection.connect(try await SharedPostgres.server().url)
        let table = try await table(connection)
        await #expect(throws: PostgresError.self) {
            try await connection.transaction { () async throws(PostgresError) in
                try await connection.execute("INSERT INTO \(table) (id) VALUES (1)")
                try await connection.execute("INSERT INTO \(table) (id) VALUES (1)")
            }
        }
        try await connection.transaction { () async throws(PostgresError) in
            try await connection.execute("INSERT INTO \(table) (id) VALUES (2)")
        }
        #expect(try await connection.execute("SELECT id FROM \(table)").rows == [[.integer(2)]])
        await connection.close()
    }

    @Test func aWrongPasswordOrAClosedPortNamesTheServerAndNeverThePassword() async throws {
        let server = try await SharedPostgres.server()
        let wrong = server.url.replacingOccurrences(of: server.password, with: "not-the-password-\(UUID())")
        await #expect {
            _ = try await PostgresConnection.connect(wrong)
        } throws: { error in
            let text = "\(error)"
            return (error as? PostgresError)?.kind == .connect && text.contains("127.0.0.1:\(server.port)")
                && text.contains("password authentication failed") && !text.contains("not-the-password")
        }
        await #expect {
            _ = try await PostgresConnection.connect("postgresql://cloudsync:secret-pw@127.0.0.1:1/postgres")
        } throws: { error in
            let text = "\(error)"
            return (error as? PostgresError)?.kind == .unreachable && text.contains("127.0.0.1:1")
                && !text.contains("secret-pw")
        }
    }

    @Test func anAdvisoryLockIsHeldByOneSessionAndReleasedWhenItEnds() async throws {
        let url = try await SharedPostgres.server().url
        let first = try await PostgresConnection.connect(url)
        let second = try await PostgresConnection.connect(url)
        let key = PostgresValue.integer(Int64.random(in: 1...Int64.max))
        @Sendable func take(_ connection: PostgresConnection) async throws -> Bool {
            try await connection.execute("SELECT pg_try_advisory_lock($1) AS taken", [key]).value("taken")
                == .boolean(true)
        }
        #expect(try await take(first))
        #expect(try await !take(second))
        // The holder's session ends without unlocking (as a runner that dies): the lock goes with it.
        await first.close()
        try await waitUntil(asking: { try await take(second) })
        await second.close()
    }

    @Test func callsFromManyTasksOnOneConnectionRunOneAfterAnother() async throws {
        let connection = try await PostgresConnection.connect(try await SharedPostgres.server().url)
        let table = try await table(connection)
        let insert = try await connection.prepare("INSERT INTO \(table) (id, name) VALUES ($1, $2)")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for id in 0..<100 {
                group.addTask { try await insert.execute([.integer(Int64(id)), .text("row \(id)")]) }
            }
            try await group.waitForAll()
        }
        #expect(try await connection.execute("SELECT count(*) AS n FROM \(table)").value("n") == .integer(100))
        await connection.close()
    }

    @Test func arraysCarryEveryTextAndNullThroughOneStatement() async throws {
        let connection = try PostgresConnection.connectBlocking(try await SharedPostgres.server().url)
        defer { connection.closeBlocking() }
        let texts: [String?] = [
            "", "plain", "with \"quotes\"", "back\\slash", "{braces}", "a,b", "NULL", nil, " spaced ", "Zoë 日本 🌍",
            "new\nline", "\\\"",
        ]
        let rows = try connection.blocking { (db) throws(PostgresError) in
            try db.execute(
                "SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS r(t, n) ORDER BY n", [.array(texts)]
            ).rows
        }
        #expect(rows.map { $0[0].text } == texts)
    }

    @Test func aBlockingSessionPreparesEachTextOnceAndRollsBackWhatThrows() async throws {
        let connection = try PostgresConnection.connectBlocking(try await SharedPostgres.server().url)
        defer { connection.closeBlocking() }
        let table = PostgresServer.uniqueName()
        try connection.blocking { (db) throws(PostgresError) in
            try db.executeScript("CREATE TABLE \(table) (id bigint PRIMARY KEY)")
            for id in 0..<50 { try db.execute("INSERT INTO \(table) VALUES ($1)", [.integer(Int64(id))]) }
        }
        #expect(throws: PostgresError.self) {
            try connection.blocking { (db) throws(PostgresError) in
                try db.transaction { () throws(PostgresError) in
                    try db.execute("INSERT INTO \(table) VALUES ($1)", [.integer(100)])
                    try db.execute("INSERT INTO \(table) VALUES ($1)", [.integer(0)])
                }
            }
        }
        let (count, prepared) = try connection.blocking { (db) throws(PostgresError) in
            (
                try db.execute("SELECT count(*) FROM \(table)").rows[0][0],
                try db.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'INSERT%'").rows[0][0]
            )
        }
        #expect(count == .integer(50), "the transaction's first insert was rolled back with it")
        #expect(prepared == .integer(1))
    }
}
