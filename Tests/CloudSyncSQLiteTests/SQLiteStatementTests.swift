import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncSQLite

@Suite struct SQLiteStatementTests {
    let directory: TemporaryDirectory
    let database: SQLiteDatabase

    init() throws {
        directory = try TemporaryDirectory()
        database = try SQLiteDatabase(path: directory.file("values.db"))
        try database.write { try $0.executeScript("CREATE TABLE v (id INTEGER PRIMARY KEY, value ANY) STRICT") }
    }

    static let values: [SQLiteValue] = [
        .null,
        .integer(0), .integer(Int64.max), .integer(Int64.min), .integer(-1),
        .real(3.141592653589793), .real(-0.0), .real(1e308), .real(.infinity),
        .text(""), .text("plain ascii"), .text("embedded\u{0}NUL\u{0}"), .text("héllo wörld — 日本語 🌍👩‍👩‍👧"),
        .text(String(repeating: "long ", count: 20_000)),
        .blob(Data()), .blob(Data([0, 1, 2, 255, 0])), .blob(Data(repeating: 0xAB, count: 100_000)),
    ]

    @Test(arguments: values)
    func bindAndReadRoundTrip(_ value: SQLiteValue) throws {
        let stored = try database.write { db -> SQLiteValue in
            try db.execute("INSERT INTO v (value) VALUES (?)", value)
            let statement = try db.prepare("SELECT value FROM v WHERE id = ?").bind(db.lastInsertRowID)
            #expect(try statement.step())
            let read = statement.value(0)
            #expect(try statement.step() == false)
            return read
        }
        #expect(stored == value)
    }

    @Test func typedReadersMatchTheStorageClass() throws {
        let text = "a\u{0}b ✓"
        let blob = Data([9, 0, 9])
        try database.write { db in
            try db.execute("INSERT INTO v (id, value) VALUES (1, ?)", Int64(-42))
            try db.execute("INSERT INTO v (id, value) VALUES (2, ?)", 2.5)
            try db.execute("INSERT INTO v (id, value) VALUES (3, ?)", text)
            try db.execute("INSERT INTO v (id, value) VALUES (4, ?)", blob)
            try db.execute("INSERT INTO v (id, value) VALUES (5, ?)", String?.none)
            try db.execute("INSERT INTO v (id, value) VALUES (6, ?)", Data())
        }
        try database.read { db in
            let statement = try db.prepare("SELECT value FROM v WHERE id = ?")
            try statement.bind(1)
            _ = try statement.step()
            #expect(statement.int64(0) == -42)
            try statement.bind(2)
            _ = try statement.step()
            #expect(statement.double(0) == 2.5)
            try statement.bind(3)
            _ = try statement.step()
            #expect(statement.string(0) == text)
            #expect(statement.string(0)?.utf8.count == text.utf8.count)
            try statement.bind(4)
            _ = try statement.step()
            #expect(statement.data(0) == blob)
            try statement.bind(5)
            _ = try statement.step()
            #expect(statement.isNull(0))
            #expect(statement.string(0) == nil)
            #expect(statement.data(0) == nil)
            try statement.bind(6)
            _ = try statement.step()
            #expect(statement.isNull(0) == false)
            #expect(statement.data(0) == Data())
        }
    }

    @Test func aStatementRunsAgainWithNewBindings() throws {
        try database.write { db in
            let insert = try db.prepare("INSERT INTO v (value) VALUES (?)")
            for number in 1...100 { try insert.bind(number).run() }
        }
        let sum = try database.read { try $0.query("SELECT sum(value) FROM v") { $0.int64(0) } }
        #expect(sum == [5050])
    }

    @Test(arguments: [
        "", "plain ascii", "embedded\u{0}NUL\u{0}", "héllo wörld — 日本語 🌍", String(repeating: "long ", count: 20_000),
    ])
    func textBoundByReferenceIsStoredWhole(_ text: String) throws {
        let stored = try database.write { db -> SQLiteValue in
            let insert = try db.prepare("INSERT INTO v (id, value) VALUES (?, ?)")
            try insert.bind(1, at: 1)
            try insert.withText(text, at: 2) { try insert.run() }
            return try db.query("SELECT value FROM v WHERE id = 1") { $0.value(0) }[0]
        }
        #expect(stored == .text(text))
    }

    @Test func textBoundByReferenceIsUnboundAfterwards() throws {
        try database.write { db in
            let insert = try db.prepare("INSERT INTO v (id, value) VALUES (?, ?)")
            try insert.bind(1, at: 1)
            try insert.withText("first", at: 2) { try insert.run() }
            // Run again without binding the text: the string's bytes are no longer the statement's.
            try insert.bind(2, at: 1)
            try insert.run()
        }
        let rows = try database.read {
            try $0.query("SELECT id, value FROM v ORDER BY id") { [$0.value(0), $0.value(1)] }
        }
        #expect(rows == [[.integer(1), .text("first")], [.integer(2), .null]])
    }

    @Test func textsBoundTogetherByReferenceAreStoredWholeAndUnboundAfterwards() throws {
        let texts = [
            "", "plain ascii", "embedded\u{0}NUL\u{0}", "héllo wörld — 日本語 🌍", String(repeating: "long ", count: 5_000),
        ]
        try database.write { db in
            let insert = try db.prepare(
                "INSERT INTO v (id, value) VALUES " + texts.indices.map { _ in "(?, ?)" }.joined(separator: ", "))
            // Text i goes to parameter 2i + 2, its row's id to 2i + 1.
            try insert.withTexts(texts.enumerated().map { (2 * $0 + 2, $1) }) {
                for row in texts.indices { try insert.bind(Int64(row + 1), at: 2 * row + 1) }
                try insert.run()
            }
            // Every binding is cleared: run again with new ids only, the texts are NULL.
            for row in texts.indices { try insert.bind(Int64(row + 101), at: 2 * row + 1) }
            try insert.run()
        }
        let rows = try database.read { try $0.query("SELECT value FROM v ORDER BY id") { $0.value(0) } }
        #expect(rows == texts.map { .text($0) } + texts.map { _ in .null })
    }

    @Test func aCachedStatementIsPreparedOnceAndComesBackReset() throws {
        try database.write { db in
            var handles: Set<OpaquePointer> = []
            for number in 1...3 {
                let insert = try db.cachedStatement("INSERT INTO v (value) VALUES (?)")
                handles.insert(insert.handle)
                try insert.bind(Int64(number), at: 1)
                try insert.run()
            }
            #expect(handles.count == 1)
            let first = try db.cachedStatement("SELECT ?")
            try first.bind(7, at: 1)
            #expect(try first.step())
            #expect(first.int64(0) == 7)
        }
        try database.read { db in
            // Back from the cache: rewound, and its bindings cleared.
            let again = try db.cachedStatement("SELECT ?")
            #expect(try again.step())
            #expect(again.isNull(0))
        }
        let sum = try database.read { try $0.query("SELECT sum(value) FROM v") { $0.int64(0) } }
        #expect(sum == [6])
    }

    @Test func theSameCachedSQLInUseTwiceGetsTwoStatements() throws {
        try database.write { db in
            try db.executeScript("INSERT INTO v (value) VALUES (1), (2)")
            let sql = "SELECT value FROM v ORDER BY id"
            let outer = try db.cachedStatement(sql)
            #expect(try outer.step())
            let inner = try db.cachedStatement(sql)
            #expect(inner.handle != outer.handle)
            #expect(try inner.step())
            #expect(inner.int64(0) == 1)
            // The outer statement kept its place.
            #expect(try outer.step())
            #expect(outer.int64(0) == 2)
        }
    }

    @Test func aCachedStatementOutlivingItsDatabaseEndsTheClose() throws {
        let log = directory.file("values.db-wal")
        var kept: SQLiteStatement? = try database.read { db in try db.cachedStatement("SELECT 1") }
        database.close()
        // SQLite finishes closing (folding the log into the file and removing it) once the last statement is gone.
        #expect(FileManager.default.fileExists(atPath: log))
        kept = nil
        #expect(kept == nil)
        #expect(!FileManager.default.fileExists(atPath: log))
    }

    @Test func invalidSQLReportsTheStatement() throws {
        let error = #expect(throws: SQLiteError.self) {
            try database.read { _ = try $0.prepare("SELEKT 1") }
        }
        #expect(error?.code == .error)
        #expect(error?.message.contains("syntax error") == true)
        #expect(error?.sql == "SELEKT 1")
    }
}
