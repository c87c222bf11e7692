import CloudSync
import CloudSyncCLI
import CloudSyncTesting
import Testing

@Suite struct CommandLineTests {
    let executable: String
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    @Test func versionPrintsOnStandardOutput() throws {
        let result = try ProcessRunner.run(executable, ["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput == "cloudsync \(CloudSyncVersion.current)\n")
        #expect(result.standardError.isEmpty)
    }

    @Test(arguments: ["--help", "-h", "help"])
    func helpDescribesTheCommand(_ flag: String) throws {
        let result = try ProcessRunner.run(executable, [flag])
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("OVERVIEW: "))
        for section in [
            "USAGE: cloudsync", "SUBCOMMANDS:", "validate FILE", "plan FILE", "OPTIONS:", "--version", "EXIT CODES:",
            "64",
        ] {
            #expect(result.standardOutput.contains(section), "help lacks \(section)")
        }
    }

    @Test(arguments: [
        (["--bogus"], "Error: unknown option '--bogus'"),
        (["frobnicate"], "Error: unknown command 'frobnicate'"),
        ([], "Error: no command given"),
        (["--version", "extra"], "Error: unexpected argument 'extra'"),
    ])
    func usageErrorsGoToStandardErrorWithExitCode64(arguments: [String], message: String) throws {
        let result = try ProcessRunner.run(executable, arguments)
        #expect(result.status == ExitCode.usage.rawValue)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError
                == "\(message)\nUsage: cloudsync <subcommand> [options] | cloudsync [--version] [--help]\n  See 'cloudsync --help'.\n"
        )
    }
}
