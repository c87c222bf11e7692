import CloudSync
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

@Suite struct CommandLineTests {
    let executable: String
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    @Test func versionPrintsOnStandardOutput() async throws {
        let result = try await ProcessRunner.run(executable, ["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput == "cloudsync \(CloudSyncVersion.current)\n")
        #expect(result.standardError.isEmpty)
    }

    @Test(arguments: ["--help", "-h", "help"])
    func helpDescribesTheCommand(_ flag: String) async throws {
        let result = try await ProcessRunner.run(executable, [flag])
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
        (["valdate"], "Error: unknown command 'valdate'; did you mean 'validate'?"),
        (["--verison"], "Error: unknown option '--verison'; did you mean '--version'?"),
    ])
    func usageErrorsGoToStandardErrorWithExitCode64(arguments: [String], message: String) async throws {
        let result = try await ProcessRunner.run(executable, arguments)
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

    @Test func validateAcceptsTheExamplesAndReportsEveryErrorOfABrokenFile() async throws {
        let good = try await ProcessRunner.run(executable, ["validate", root + "/pipelines/scheduled-sync.yaml"])
        #expect(good.status == 0)
        #expect(good.standardOutput == root + "/pipelines/scheduled-sync.yaml: valid\n")
        #expect(good.standardError.isEmpty)

        // The verdicts are the result (standard output); the errors with their source lines are for people.
        let broken = root + "/Tests/Fixtures/invalid-pipelines/59-many-errors.yaml"
        let result = try await ProcessRunner.run(executable, ["validate", root + "/pipelines/demo.yaml", broken])
        #expect(result.status == 64)
        #expect(result.standardOutput == root + "/pipelines/demo.yaml: valid\n" + broken + ": 5 errors\n")
        #expect(result.standardError.contains("59-many-errors.yaml:4:20: error: `type` in provider `primary`"))
        #expect(!result.standardError.contains(": valid"))
    }

    @Test func validateJSONGivesEachFilesErrorsWithTheirLocations() async throws {
        let broken = root + "/Tests/Fixtures/invalid-pipelines/59-many-errors.yaml"
        let result = try await ProcessRunner.run(
            executable, ["validate", "--json", root + "/pipelines/demo.yaml", broken])
        #expect(result.status == 64)
        #expect(result.standardError.isEmpty)
        let files = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
        #expect(files.map { $0["file"] as? String } == [root + "/pipelines/demo.yaml", broken])
        #expect(files.map { $0["valid"] as? Bool } == [true, false])
        #expect((files[0]["errors"] as? [Any])?.isEmpty == true)
        let errors = try #require(files[1]["errors"] as? [[String: Any]])
        #expect(errors.count == 5)
        #expect(errors[0]["location"] as? String == broken + ":4:20")
        #expect(errors[0]["line"] as? Int == 4)
        #expect(errors[0]["column"] as? Int == 20)
        #expect((errors[0]["message"] as? String)?.hasPrefix("`type` in provider `primary` must be one of") == true)
        let valid = try await ProcessRunner.run(executable, ["validate", root + "/pipelines/demo.yaml", "--json"])
        #expect(valid.status == 0)
    }

    @Test func validateCountsEveryErrorButShowsTheFirstHundred() async throws {
        let directory = try TemporaryDirectory()
        var source = "version: 1\nname: p\nproviders: { a: { type: memory } }\nstore: { providers: [a] }\njobs:\n"
        for index in 0..<250 { source += "  - { type: verify, provider: nope\(index) }\n" }
        try source.write(toFile: directory.file("p.yaml"), atomically: true, encoding: .utf8)
        let text = try await ProcessRunner.run(executable, ["validate", directory.file("p.yaml")])
        #expect(text.standardOutput == directory.file("p.yaml") + ": 250 errors\n")
        #expect(text.standardError.components(separatedBy: ": error: ").count == 101)
        #expect(text.standardError.hasSuffix("and 150 more errors not shown; fix these and validate again\n"))
        let json = try await ProcessRunner.run(executable, ["validate", "--json", directory.file("p.yaml")])
        let files = try #require(
            try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
        #expect(files.first?["errorCount"] as? Int == 250)
        #expect((files.first?["errors"] as? [Any])?.count == 100)
    }

    @Test func planPrintsTextOrJSONAndNeverKeyMaterial() async throws {
        let file = root + "/pipelines/encrypted-backup.yaml"
        let text = try await ProcessRunner.run(executable, ["plan", file])
        #expect(text.status == 0)
        #expect(text.standardOutput.contains("vault: xchacha20poly1305, keys demo2026 (current demo2026)"))
        let key = try String(contentsOfFile: root + "/pipelines/keys/demo-backup.key", encoding: .utf8)
        #expect(!text.standardOutput.contains(key.trimmingCharacters(in: .whitespacesAndNewlines)))
        // The pinned plan has the built-in deadline, not the one the test harness sets for every pipeline.
        var environment = ProcessInfo.processInfo.environment
        environment["CLOUDSYNC_TIMEOUT_MS"] = nil
        let json = try await ProcessRunner.run(executable, ["plan", "--json", file], environment: environment)
        #expect(
            json.standardOutput
                == (try String(contentsOfFile: root + "/Tests/Fixtures/plans/encrypted-backup.json", encoding: .utf8)))
    }

    @Test func schemaPrintsThePipelineSchema() async throws {
        let result = try await ProcessRunner.run(executable, ["schema", "pipeline"])
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

@Suite struct ValidateWarningTests {
    @Test func aProviderNeverAvailableHereValidatesWithAWarning() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let file = directory.file("kv.yaml")
        try
            "version: 1\nname: kv\nproviders:\n  kv: { type: icloudKV }\n  local: { type: memory }\nstore:\n  providers: [kv, local]\n"
            .write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(executable, ["validate", file])
        #expect(result.status == 0)
        #expect(result.standardOutput == "\(file): valid (1 warning)\n")
        #expect(
            result.standardError.hasPrefix("\(file):4:3: warning: provider `kv` (icloudKV): the iCloud key-value store")
        )
    }
}
