import CloudSync
import CloudSyncTesting
import Foundation
import Testing

/// The Drive emulator's search language: precedence, quoting, and the terms clients use.
@Suite struct DriveQueryTests {
    func parse(_ text: String) throws -> DriveQuery.Expression { try DriveQuery(text).expression }

    @Test func notBindsTighterThanAndWhichBindsTighterThanOr() throws {
        let (a, b, c) = (
            DriveQuery.Expression.name("=", "a"), DriveQuery.Expression.name("=", "b"),
            DriveQuery.Expression.trashed(false)
        )
        #expect(try parse("name = 'a' or name = 'b' and trashed = false") == .or(a, .and(b, c)))
        #expect(try parse("name = 'a' and name = 'b' or trashed = false") == .or(.and(a, b), c))
        #expect(try parse("(name = 'a' or name = 'b') and trashed = false") == .and(.or(a, b), c))
        #expect(try parse("not name = 'a' and name = 'b'") == .and(.not(a), b))
        #expect(try parse("not (name = 'a' or name = 'b')") == .not(.or(a, b)))
        #expect(try parse("NOT name = 'a' OR name = 'b'") == .or(.not(a), b))
        #expect(try parse("name = 'a' or name = 'b' or trashed = false") == .or(.or(a, b), c))
    }

    @Test func quotesAndBackslashesAreEscapedWithABackslash() throws {
        #expect(try parse(#"name = 'Valentine\'s Day'"#) == .name("=", "Valentine's Day"))
        #expect(try parse(#"name = 'a\\b'"#) == .name("=", #"a\b"#))
        #expect(try parse(#"name = 'or (not) and'"#) == .name("=", "or (not) and"))
        #expect(try parse(#"'x\'y' in parents"#) == .inParents("x'y"))
    }

    @Test func timesAndPropertiesParse() throws {
        #expect(
            try parse("modifiedTime > '2026-12-01T03:14:13.123Z'")
                == .time(field: "modifiedTime", operator: ">", milliseconds: 1_796_094_853_123))
        // No offset is UTC; an offset is honoured.
        #expect(
            try parse("createdTime <= '2026-12-01T03:14:13'")
                == .time(field: "createdTime", operator: "<=", milliseconds: 1_796_094_853_000))
        #expect(
            try parse("modifiedTime >= '2026-12-01T05:14:13+02:00'")
                == .time(field: "modifiedTime", operator: ">=", milliseconds: 1_796_094_853_000))
        #expect(
            try parse("appProperties has { key='k' and value='v w' }")
                == .has(field: "appProperties", key: "k", value: "v w"))
        #expect(try parse("properties has {key='k' and value=''}") == .has(field: "properties", key: "k", value: ""))
        #expect(try parse("") == .everything)
    }

    @Test(arguments: [
        "name ~ 'x'", "name = 'x", "name = x", "(name = 'x'", "name = 'x')", "name = 'x' and", "or name = 'x'",
        "not", "trashed = maybe", "modifiedTime > 'yesterday'", "modifiedTime contains '2026-01-01T00:00:00Z'",
        "appProperties has { key='k' }", "appProperties has { value='v' and key='k' }", "size > '3'",
        "name = 'a' name = 'b'", "'x' in", "name != ", "name ! = 'x'",
    ])
    func malformedQueriesAreRefused(_ text: String) {
        #expect(throws: DriveQuery.ParseError.self) { try DriveQuery(text) }
    }

    @Test func filesMatchAsTheTreeSays() throws {
        let file = try JSONDecoder().decode(
            DriveFilesEmulator.File.self,
            from: Data(
                #"""
                {"id": "1", "name": "alpha", "mimeType": "text/plain", "parents": ["appDataFolder"], "content": "",
                 "createdMs": 1000, "modifiedMs": 2000, "version": 1, "trashed": false, "appProperties": {"k": "v"}}
                """#.utf8))
        func matches(_ text: String) throws -> Bool { try DriveQuery(text).matches(file, appDataFolderID: "0Afolder") }
        #expect(try matches("name = 'alpha' or name = 'beta'"))
        #expect(try !matches("not (name contains 'al' and trashed = false)"))
        #expect(try matches("'appDataFolder' in parents and '0Afolder' in parents"))
        #expect(try !matches("'root' in parents"))
        #expect(try matches("modifiedTime > '1970-01-01T00:00:01.999Z' and modifiedTime <= '1970-01-01T00:00:02Z'"))
        #expect(try !matches("createdTime != '1970-01-01T00:00:01Z'"))
        #expect(try matches("appProperties has { key='k' and value='v' }"))
        #expect(try !matches("appProperties has { key='k' and value='w' } or properties has { key='k' and value='v' }"))
        #expect(try matches("mimeType = 'text/plain' and mimeType != 'image/png'"))
    }
}
