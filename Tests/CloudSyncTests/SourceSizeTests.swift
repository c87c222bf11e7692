import CloudSyncTesting
import Foundation
import Testing

/// Keeps files and functions a size a reader takes in: no file over 500 lines and no function over 60 in Sources,
/// but for those scripts/source-sizes.allowed still lists, none of which may grow; splitting one means removing its
/// line (scripts/source_sizes.py says which).
@Suite struct SourceSizeTests {
    @Test func noFileOrFunctionIsOverItsLimitUnlessListedAndNoneGrew() async throws {
        let check = try await ProcessRunner.run(
            "/usr/bin/env", ["python3", Repository.root + "/scripts/source_sizes.py", "--check"])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
    }

    /// Lines are counted as a reader sees them: a backslash that continues a multi-line string still ends a line of
    /// the file (the count once lost those, and let a 538-line file pass as 499), and an escaped quote or backslash
    /// inside a string ends nothing.
    @Test func everyLineOfAFileCountsStringsAndEscapesIncluded() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.file("Probe.swift")
        try #"""
        let help = """
            one line \
            continued \
            and ended
            """
        func f() {
            print("\(help) \\ \" quoted")
        }

        """#.write(toFile: file, atomically: true, encoding: .utf8)
        let measured = try await ProcessRunner.run(
            "/usr/bin/env", ["python3", Repository.root + "/scripts/source_sizes.py", "--measure", file])
        #expect(measured.status == 0, "\(measured.standardError)")
        #expect(measured.standardOutput == "\(file) 8\n\(file) f 3\n")
    }
}
