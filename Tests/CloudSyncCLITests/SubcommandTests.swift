import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// Help, usage errors and completions of every subcommand, through the built binary.
@Suite struct SubcommandTests {
    let executable: String
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    static let runUsage =
        "cloudsync run FILE [--job NAME]... [--no-needs] [--dry-run] [--report PATH|-] [--yes] [--force] [--read-unchanged] [--join] "
        + "[--join-wait DURATION] [--run-id ID] [--quiet] [--progress auto|always|never] [--verbose]"

    @Test(arguments: [["run", "--help"], ["run", "-h"], ["help", "run"], ["run", "x.yaml", "--bogus", "-h"]])
    func subcommandHelpDescribesThatSubcommand(_ arguments: [String]) async throws {
        let result = try await ProcessRunner.run(executable, arguments)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        let lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "OVERVIEW: Run a pipeline's jobs in order and write a JSON report.")
        for line in [
            "USAGE: \(Self.runUsage)", "ARGUMENTS:", "  FILE                    The pipeline file.", "OPTIONS:",
            "  -j, --job NAME          Run only this job and the jobs it needs; repeat for more (default: every",
            "  --no-needs              With --job, run only the jobs named, not the jobs they need.",
            "  -q, --quiet             Print only a line per failed or errored job, and no progress.",
            "  --progress MODE         Show a progress line; auto shows it when standard error is a terminal.",
            "                          (values: auto, always, never; default: auto)",
            "  -v, --verbose           Log each provider request on standard error: provider, method, path",
            "  -h, --help              Show this help and exit.", "EXIT CODES:",
            "  3    every job succeeded but "
                + "writes wait in the outbox for a provider that could not take them",
            "  75   another run of the same pipeline is in progress (without --join, or under another --run-id)",
        ] {
            #expect(lines.contains(line), "run --help lacks \(line)")
        }
    }

    @Test(arguments: [
        ["validate"], ["plan"], ["schema"], ["outbox"], ["outbox", "list"], ["outbox", "flush"],
        ["outbox", "discard"], ["history"], ["login"], ["logout"], ["keygen"], ["init"], ["completions"], ["man"],
        ["version"], ["help"],
    ])
    func everySubcommandHasHelp(_ words: [String]) async throws {
        for arguments in [words + ["--help"], ["help"] + words] {
            let result = try await ProcessRunner.run(executable, arguments)
            #expect(result.status == 0, "\(arguments)")
            #expect(result.standardOutput.hasPrefix("OVERVIEW: "), "\(arguments)")
            #expect(result.standardOutput.contains("\nUSAGE: cloudsync \(words.joined(separator: " ")) "))
            #expect(result.standardOutput.contains("\nOPTIONS:\n"))
            #expect(result.standardOutput.contains("\nEXIT CODES:\n  "))
        }
    }

    @Test func eachHelpListsTheExitCodesThatCommandCanReturn() async throws {
        let keygen = try await ProcessRunner.run(executable, ["keygen", "--help"]).standardOutput
        #expect(
            keygen.hasSuffix(
                """
                EXIT CODES:
                  0    the key file was written
                  64   the command line was wrong; nothing was done
                  73   the key file could not be created: it already exists, or its directory is missing

                """))
        let top = try await ProcessRunner.run(executable, ["--help"]).standardOutput
        #expect(top.contains("\n  73   keygen or init could not create its file: it exists"))
        #expect(
            top.contains("\n  completions bash|zsh|fish\n                          Print a shell completion script"))
    }

    @Test(arguments: [
        (["run"], "missing expected argument 'FILE'", "run", runUsage),
        (["run", "--dryrun", "x.yaml"], "unknown option '--dryrun'; did you mean '--dry-run'?", "run", runUsage),
        (["run", "x.yaml", "-x"], "unknown option '-x'", "run", runUsage),
        (
            ["run", "x.yaml", "--progress", "sometimes"],
            "the value 'sometimes' is invalid for '--progress'; pick auto, always or never", "run", runUsage
        ),
        (
            ["run", "x.yaml", "--progress=nevr"],
            "the value 'nevr' is invalid for '--progress'; pick auto, always or never; did you mean 'never'?", "run",
            runUsage
        ),
        (["run", "x.yaml", "--job"], "missing value for '--job NAME'", "run", runUsage),
        (["run", "x.yaml", "-j", "--quiet"], "missing value for '--job NAME'", "run", runUsage),
        (["run", "a.yaml", "b.yaml"], "unexpected argument 'b.yaml'", "run", runUsage),
        (["run", "--dry-run=yes", "a.yaml"], "'--dry-run' takes no value; found 'yes'", "run", runUsage),
        (["validate"], "missing expected argument 'FILE'", "validate", "cloudsync validate FILE... [--json]"),
        (
            ["schema", "foo"], "the value 'foo' is invalid for 'KIND'; pick pipeline or report", "schema",
            "cloudsync schema pipeline|report"
        ),
        (
            ["outbox"], "outbox needs a subcommand: list, flush or discard", "outbox",
            "cloudsync outbox list|flush|discard ..."
        ),
        (
            ["outbox", "lst", "x.yaml"], "unknown outbox subcommand 'lst'; did you mean 'list'?", "outbox",
            "cloudsync outbox list|flush|discard ..."
        ),
        (
            ["outbox", "discard"], "missing expected argument 'FILE'", "outbox discard",
            "cloudsync outbox discard FILE [--key GLOB]... [--provider ID] [--yes]"
        ),
        (
            ["history", "x.yaml", "--limit=0"], "--limit needs a whole number of at least 1; found '0'", "history",
            "cloudsync history FILE [--limit N] [--json]"
        ),
        (["keygen"], "missing expected argument '--out FILE'", "keygen", "cloudsync keygen --out FILE"),
        (
            ["completions", "tcsh"], "the value 'tcsh' is invalid for 'SHELL'; pick bash, zsh or fish", "completions",
            "cloudsync completions bash|zsh|fish"
        ),
        (
            ["help", "valdate"], "unknown command 'valdate'; did you mean 'validate'?", "help",
            "cloudsync help [SUBCOMMAND...]"
        ),
    ])
    func usageErrorsShowTheSubcommandsUsage(arguments: [String], message: String, command: String, usage: String)
        async throws
    {
        let result = try await ProcessRunner.run(executable, arguments)
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError == "Error: \(message)\nUsage: \(usage)\n  See 'cloudsync help \(command)'.\n")
    }

    @Test func everythingAfterADoubleDashIsAnArgument() async throws {
        let result = try await ProcessRunner.run(executable, ["validate", "--", "--help"])
        #expect(result.status == 64)
        #expect(result.standardError.contains("--help:1:1: error: cannot read the pipeline file"))
    }

    @Test func bashCompletionParsesAndCompletesSubcommandsOptionsAndValues() async throws {
        let result = try await ProcessRunner.run(executable, ["completions", "bash"])
        #expect(result.status == 0)
        let directory = try TemporaryDirectory()
        let script = directory.file("cloudsync.bash")
        try result.standardOutput.write(toFile: script, atomically: true, encoding: .utf8)
        let check = try await ProcessRunner.run("/bin/bash", ["-n", script])
        #expect(check.status == 0, "\(check.standardError)")

        func complete(_ words: [String]) async throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let run = try await ProcessRunner.run(
                "/bin/bash",
                [
                    "-c",
                    "source '\(script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _cloudsync; "
                        + "printf '%s\\n' \"${COMPREPLY[@]}\"",
                ])
            #expect(run.status == 0, "\(run.standardError)")
            return run.standardOutput.split(separator: "\n").map(String.init)
        }
        await #expect(
            try complete(["cloudsync", ""]) == [
                "init", "run", "serve", "validate", "plan", "apply", "migrations", "schema", "outbox", "history",
                "snapshots",
                "restore",
                "forget",
                "repair", "unlock", "login", "logout", "accounts",
                "cloudkit",
                "keygen",
                "completions", "man", "version", "help", "--version", "--help", "-h",
            ])
        await #expect(
            try complete(["cloudsync", "login", "x.yaml", "--"]) == [
                "--provider", "--account", "--no-browser", "--help",
            ])
        await #expect(try complete(["cloudsync", "run", "x.yaml", "--progress", "a"]) == ["auto", "always"])
        await #expect(try complete(["cloudsync", "run", "x.yaml", "--d"]) == ["--dry-run"])
        await #expect(try complete(["cloudsync", "schema", ""]) == ["pipeline", "report"])
        await #expect(try complete(["cloudsync", "init", "x.yaml", "--template", "s"]) == ["starter", "s3-backup"])
        await #expect(try complete(["cloudsync", "init", "--"]) == ["--template", "--help"])
        await #expect(try complete(["cloudsync", "outbox", ""]) == ["list", "flush", "discard", "--help", "-h"])
        await #expect(
            try complete(["cloudsync", "outbox", "discard", "x.yaml", "--"]) == [
                "--key", "--provider", "--yes", "--help",
            ])
        await #expect(try complete(["cloudsync", "completions", ""]) == ["bash", "zsh", "fish"])
        await #expect(
            try complete(["cloudsync", "cloudkit", ""]) == [
                "status", "ensure-zone", "changes", "delete-zone", "--help", "-h",
            ])
        await #expect(
            try complete(["cloudsync", "cloudkit", "changes", "x.yaml", "--"]) == [
                "--provider", "--since", "--json", "--help",
            ])
    }

    @Test func zshCompletionNamesEverySubcommandOptionAndChoice() async throws {
        let result = try await ProcessRunner.run(executable, ["completions", "zsh"])
        #expect(result.status == 0)
        let script = result.standardOutput
        #expect(script.hasPrefix("#compdef cloudsync\n"))
        for name in [
            "init", "run", "validate", "plan", "schema", "outbox", "history", "snapshots", "login", "logout",
            "cloudkit",
            "keygen",
            "completions", "version", "help",
        ] {
            #expect(script.contains("\n        '\(name):"), "zsh completion lacks \(name)")
        }
        for fragment in [
            "'list:", "'flush:", "'discard:", "{--job,-j}", "--dry-run[", ":MODE:(auto always never)",
            ":KIND:(pipeline report)", ":SHELL:(bash zsh fish)", ":NAME:_cloudsync_names jobs",
            ":NAME:(starter encrypted-backup s3-backup drive-to-cloudkit)", "--key[", "--provider[", "--limit[",
            "--out[",
        ] {
            #expect(script.contains(fragment), "zsh completion lacks \(fragment)")
        }
        // zsh is not needed to run the tests; where it is installed, it must accept the script.
        for zsh in ["/bin/zsh", "/usr/bin/zsh"] where FileManager.default.isExecutableFile(atPath: zsh) {
            let directory = try TemporaryDirectory()
            try script.write(toFile: directory.file("_cloudsync"), atomically: true, encoding: .utf8)
            #expect(try await ProcessRunner.run(zsh, ["-n", directory.file("_cloudsync")]).status == 0)
        }
    }
}
