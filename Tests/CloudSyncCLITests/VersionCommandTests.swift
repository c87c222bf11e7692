import CloudSync
import CloudSyncHTTPServer
import CloudSyncOpenSSL
import CloudSyncPostgres
import CloudSyncSQLite
import CloudSyncSodium
import CloudSyncTesting
import CloudSyncYAML
import Foundation
import Testing

@testable import CloudSyncCLI

/// `cloudsync version [--json]`, and `--version` after a subcommand, through the built binary.
@Suite struct VersionCommandTests {
    let executable: String
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Every key `version --json` prints; the text prints `version` on its first line and the others in this order.
    static let keys = [
        "version", "commit", "commitDate", "swift", "os", "kernel", "arch", "sqlite", "libsodium", "libyaml", "libcurl",
        "libcurlTLS", "libcrypto", "libpq", "libmicrohttpd",
    ]

    /// The C libraries' keys and what pkg-config calls their development packages.
    static let libraries = [
        ("sqlite", "sqlite3"), ("libsodium", "libsodium"), ("libyaml", "yaml-0.1"), ("libcurl", "libcurl"),
        ("libcrypto", "libcrypto"), ("libpq", "libpq"), ("libmicrohttpd", "libmicrohttpd"),
    ]

    static func installed(_ candidates: [String]) -> String? {
        candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
    static let pkgConfig = installed(["/usr/bin/pkg-config", "/bin/pkg-config"])
    static let sqliteShell = installed(["/usr/bin/sqlite3", "/bin/sqlite3"])
    static let gitAndMake = installed(["/usr/bin/git", "/bin/git"]) != nil && installed(["/usr/bin/make"]) != nil

    /// `version --json`, checked to exit 0 with nothing on standard error.
    private func report(environment: [String: String]? = nil) async throws -> [String: String] {
        let result = try await ProcessRunner.run(executable, ["version", "--json"], environment: environment)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: String]
        return try #require(object, "version --json printed \(result.standardOutput)")
    }

    @Test func jsonHasEveryDocumentedKeyAsTextWithSortedKeys() async throws {
        let result = try await ProcessRunner.run(executable, ["version", "--json"])
        let object = try await report()
        #expect(object.keys.sorted() == Self.keys.sorted())
        #expect(object["version"] == CloudSyncVersion.current)
        for key in Self.keys { #expect(object[key]?.isEmpty == false, "\(key) is empty") }
        // Sorted keys, pretty-printed, one key a line: the order they appear in is the sorted one.
        let order = result.standardOutput.split(separator: "\n").compactMap { line in
            line.firstMatch(of: /^  "([A-Za-z]+)" :/).map { String($0.1) }
        }
        #expect(order == Self.keys.sorted())
        #expect(result.standardOutput.hasSuffix("}\n"))
        // The help names every key.
        let help = try await ProcessRunner.run(executable, ["version", "--help"]).standardOutput
        for key in Self.keys {
            #expect(help.contains(try Regex("\\b\(key)\\b")), "version --help does not name \(key)")
        }
    }

    @Test func librariesAreTheOnesThisProcessLoads() async throws {
        let object = try await report()
        #expect(object["sqlite"] == SQLiteLibrary.version)
        #expect(object["libsodium"] == SodiumLibrary.version)
        #expect(object["libyaml"] == YAMLLibrary.version)
        #expect(object["libcurl"] == CurlLibrary.version)
        #expect(object["libcurlTLS"] == CurlLibrary.tlsVersion)
        #expect(object["libcrypto"] == OpenSSLLibrary.version)
        #expect(object["libpq"] == PostgresLibrary.version)
        #expect(object["libmicrohttpd"] == NetworkHTTPServer.libraryVersion)
        for (key, _) in Self.libraries {
            let value = try #require(object[key])
            #expect(value.wholeMatch(of: /[0-9]+\.[0-9]+(\.[0-9]+)?/) != nil, "\(key): \(value)")
        }
        // Debian builds libcurl against OpenSSL, GnuTLS or NSS; whichever, it names it with a version.
        #expect(object["libcurlTLS"]?.wholeMatch(of: /[A-Za-z]+\/[0-9][0-9A-Za-z.]*/) != nil)
    }

    /// The development packages' pkg-config versions: Debian's -dev packages depend on the very version of the
    /// library they are for, so these are what a process loads, found without calling the library.
    @Test(.enabled(if: VersionCommandTests.pkgConfig != nil, "pkg-config is not installed"))
    func librariesMatchTheirPackagesVersions() async throws {
        let object = try await report()
        for (key, package) in Self.libraries {
            let query = try await ProcessRunner.run(try #require(Self.pkgConfig), ["--modversion", package])
            #expect(query.status == 0, "\(package): \(query.standardError)")
            let expected = query.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(object[key] == expected, "\(key) is \(object[key] ?? "missing"); pkg-config says \(expected)")
        }
    }

    @Test(.enabled(if: VersionCommandTests.sqliteShell != nil, "the sqlite3 shell is not installed"))
    func sqliteIsTheVersionTheSQLiteShellPrints() async throws {
        let printed = try await ProcessRunner.run(try #require(Self.sqliteShell), ["--version"])
        #expect(printed.status == 0)
        let first = printed.standardOutput.split(separator: " ").first.map(String.init)
        #expect(try await report()["sqlite"] == first)
    }

    @Test func systemIsTheOneTheShellAndUnameDescribe() async throws {
        let object = try await report()
        let uname = try await ProcessRunner.run("/bin/sh", ["-c", "uname -s -r -m"])
        let words = uname.standardOutput.split(whereSeparator: \.isWhitespace).map(String.init)
        try #require(words.count == 3)
        #expect(object["kernel"] == "\(words[0]) \(words[1]) (\(words[2]))")
        #expect(object["arch"] == words[2])
        // os-release(5) is a shell fragment: the shell's reading of it is the reference.
        let file = ["/etc/os-release", "/usr/lib/os-release"].first { FileManager.default.fileExists(atPath: $0) }
        if let file {
            let shell = try await ProcessRunner.run(
                "/bin/sh", ["-c", ". \"$1\" && printf '%s' \"${PRETTY_NAME:-Linux}\"", "sh", file])
            #expect(shell.status == 0)
            #expect(object["os"] == shell.standardOutput)
        } else {
            #expect(object["os"] == "unknown")
        }
    }

    @Test func buildFieldsAreKnownOrSayUnknown() async throws {
        let object = try await report()
        let commit = try #require(object["commit"])
        let date = try #require(object["commitDate"])
        #expect(commit == "unknown" || commit.wholeMatch(of: /[0-9a-f]{40}(-dirty)?/) != nil, "commit \(commit)")
        #expect(
            date == "unknown" || date.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z/) != nil)
        #expect((commit == "unknown") == (date == "unknown"), "commit \(commit), date \(date)")
        // Captured at build time (6.3.1) or the #if compiler test of the same compiler (6.3): never another one.
        let swift = try #require(object["swift"])
        #expect(swift == VersionReport.compilerVersion || swift.hasPrefix(VersionReport.compilerVersion + "."))
    }

    /// The release build (`make release`, which `make install` runs) is told the checkout's commit, that commit's
    /// date and the compiler's version; `make -n` shows the command without building.
    @Test(.enabled(if: VersionCommandTests.gitAndMake, "git or make is not installed"))
    func releaseBuildIsToldTheCommitItIsBuiltFrom() async throws {
        func git(_ arguments: String...) async throws -> String? {
            let result = try await ProcessRunner.run("/usr/bin/env", ["git", "-C", Self.root] + arguments)
            return result.status == 0 ? result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) : nil
        }
        // Without a caller's own CLOUDSYNC_* values (which the Makefile would take) or a parent make's flags.
        let environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("CLOUDSYNC_") && !["MAKEFLAGS", "MAKELEVEL", "MFLAGS"].contains($0.key)
        }
        let dryRun = try await ProcessRunner.run(
            "/usr/bin/make", ["-n", "-C", Self.root, "release"], environment: environment)
        #expect(dryRun.status == 0, "\(dryRun.standardError)")
        func value(_ name: String) -> String? {
            let pattern = try? Regex("\(name)=\"([^\"]*)\"")
            return pattern.flatMap { dryRun.standardOutput.firstMatch(of: $0)?[1].substring }.map(String.init)
        }
        let swift = try #require(value("CLOUDSYNC_SWIFT_VERSION"))
        #expect(swift.hasPrefix(VersionReport.compilerVersion + "."), "make release would say swift \(swift)")
        // Outside a checkout of this directory (a tarball, perhaps unpacked inside another repository) it says nothing.
        let resolvedRoot = URL(fileURLWithPath: Self.root).resolvingSymlinksInPath().path
        guard let head = try await git("rev-parse", "HEAD"),
            try await git("rev-parse", "--show-toplevel") == resolvedRoot
        else {
            #expect(value("CLOUDSYNC_COMMIT") == "")
            #expect(value("CLOUDSYNC_COMMIT_DATE") == "")
            return
        }
        let changed = try #require(try await git("status", "--porcelain", "--untracked-files=no"))
        let epoch = try #require(try await git("log", "-1", "--format=%ct"))
        let seconds = try #require(TimeInterval(epoch))
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        #expect(value("CLOUDSYNC_COMMIT") == head + (changed.isEmpty ? "" : "-dirty"))
        #expect(value("CLOUDSYNC_COMMIT_DATE") == formatter.string(from: Date(timeIntervalSince1970: seconds)))
    }

    @Test func textListsTheJSONValuesAndNothingElse() async throws {
        // Secrets in the environment, where a careless report would find them.
        let secret = "version-test-secret-\(UUID().uuidString)"
        var environment = ProcessInfo.processInfo.environment
        for name in ["AWS_SECRET_ACCESS_KEY", "CLOUDSYNC_KEY", "PGPASSWORD", "GOOGLE_CLIENT_SECRET"] {
            environment[name] = secret
        }
        let result = try await ProcessRunner.run(executable, ["version"], environment: environment)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        #expect(!result.standardOutput.contains(secret))
        let object = try await report(environment: environment)
        let expected =
            ["cloudsync \(CloudSyncVersion.current)"] + Self.keys.dropFirst().map { "- \($0): \(object[$0] ?? "?")" }
            + [""]
        #expect(
            result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == expected)
    }

    @Test(arguments: [
        ["--version"], ["version"], ["version", "--json", "--version"], ["run", "--version"],
        ["run", "x.yaml", "--bogus", "--version"], ["validate", "--version"], ["keygen", "--version"],
        ["outbox", "--version"], ["outbox", "list", "--version"], ["help", "--version"],
    ])
    func everyWayOfAskingPrintsTheSameFirstLine(_ arguments: [String]) async throws {
        let result = try await ProcessRunner.run(executable, arguments)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        let line = "cloudsync \(CloudSyncVersion.current)\n"
        if arguments == ["version"] {
            #expect(result.standardOutput.hasPrefix(line))
        } else {
            #expect(result.standardOutput == line)
        }
    }

    @Test func afterADoubleDashVersionIsAnArgument() async throws {
        let result = try await ProcessRunner.run(executable, ["validate", "--", "--version"])
        #expect(result.status == 64)
        #expect(result.standardOutput == "--version: 1 error\n")
    }

    @Test func helpWinsOverVersionAndVersionTakesNoArguments() async throws {
        let help = try await ProcessRunner.run(executable, ["run", "--version", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.hasPrefix("OVERVIEW: Run a pipeline's jobs"))
        let extra = try await ProcessRunner.run(executable, ["version", "extra"])
        #expect(extra.status == 64)
        #expect(extra.standardOutput.isEmpty)
        #expect(
            extra.standardError.hasPrefix("Error: unexpected argument 'extra'\nUsage: cloudsync version [--json]\n"))
    }

    @Test(arguments: [
        (
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n",
            "Debian GNU/Linux 12 (bookworm)"
        ),
        ("NAME=Fedora\nPRETTY_NAME='Fedora Linux 40 (Container Image)'\n", "Fedora Linux 40 (Container Image)"),
        ("PRETTY_NAME=Alpine\\ Linux\n", "Alpine Linux"),
        ("PRETTY_NAME=\"say \\\"hi\\\" for \\$5 \\n\"\n", "say \"hi\" for $5 \\n"),
        ("# PRETTY_NAME=\"commented\"\n  PRETTY_NAME=\"indented\"\r\n", "indented"),
        ("PRETTY_NAME=\"first\"\nPRETTY_NAME=\"last\"\n", "last"),
        ("NAME=Something\n", "Linux"),
    ])
    func osReleaseIsReadAsTheShellReadsIt(_ contents: String, _ expected: String) async throws {
        #expect(VersionReport.prettyName(osRelease: contents) == expected)
        // The shell agrees.
        let directory = try TemporaryDirectory()
        let file = directory.file("os-release")
        try contents.write(toFile: file, atomically: true, encoding: .utf8)
        let shell = try await ProcessRunner.run(
            "/bin/sh", ["-c", ". \"$1\" && printf '%s' \"${PRETTY_NAME:-Linux}\"", "sh", file])
        #expect(shell.standardOutput.replacingOccurrences(of: "\r", with: "") == expected)
    }
}
