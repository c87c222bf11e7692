import CloudSync
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

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

@Suite struct PipelineCommandTests {
    let executable: String
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    @Test func validateAcceptsTheExamplesAndReportsEveryErrorOfABrokenFile() throws {
        let good = try ProcessRunner.run(executable, ["validate", root + "/pipelines/scheduled-sync.yaml"])
        #expect(good.status == 0)
        #expect(good.standardError.hasSuffix("scheduled-sync.yaml: valid\n"))

        let broken = root + "/Tests/Fixtures/invalid-pipelines/59-many-errors.yaml"
        let result = try ProcessRunner.run(executable, ["validate", root + "/pipelines/demo.yaml", broken])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("59-many-errors.yaml:4:20: error: `type` in provider `primary`"))
        #expect(result.standardError.contains("59-many-errors.yaml: 5 errors\n"))
        #expect(result.standardError.contains("demo.yaml: valid"))
    }

    @Test func planPrintsTextOrJSONAndNeverKeyMaterial() throws {
        let file = root + "/pipelines/encrypted-backup.yaml"
        let text = try ProcessRunner.run(executable, ["plan", file])
        #expect(text.status == 0)
        #expect(text.standardOutput.contains("vault: xchacha20poly1305, keys demo2026 (current demo2026)"))
        let key = try String(contentsOfFile: root + "/pipelines/keys/demo-backup.key", encoding: .utf8)
        #expect(!text.standardOutput.contains(key.trimmingCharacters(in: .whitespacesAndNewlines)))
        let json = try ProcessRunner.run(executable, ["plan", "--json", file])
        #expect(
            json.standardOutput
                == (try String(contentsOfFile: root + "/Tests/Fixtures/plans/encrypted-backup.json", encoding: .utf8)))
    }

    @Test func schemaPrintsThePipelineSchema() throws {
        let result = try ProcessRunner.run(executable, ["schema", "pipeline"])
        #expect(result.status == 0)
        #expect(
            result.standardOutput
                == (try String(contentsOfFile: root + "/schemas/pipeline.schema.json", encoding: .utf8)))
    }
}

@Suite struct ExitStatusTests {
    /// Scripts and monitors depend on these numbers: never renumber.
    @Test func eachRunStatusHasItsDocumentedExitCode() {
        let codes = RunStatus.allCases.map { ($0.rawValue, ExitCode($0).rawValue) }
        #expect(
            codes.map { "\($0.0)=\($0.1)" } == ["ok=0", "failed=1", "error=2", "queued=3", "interrupted=130"])
    }
}
