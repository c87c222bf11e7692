import CloudSyncTesting
import Foundation
import Testing

/// Commands that read only local state (`history`, `outbox list`, `outbox discard`, `plan`, the completions' names)
/// on a pipeline whose provider credentials come from `${env:…}` variables that are not set, as on a workstation
/// reading a server's pipeline: they work, and say which variables `run` will need; `validate` and `run` still
/// refuse, naming them; a variable the local state itself needs (the state directory) is still refused.
@Suite struct LocalCommandsWithoutSecretsTests {
    static let pipeline = """
        version: 1
        name: creds
        state: ${env:CREDS_STATE:-state}
        providers:
          local: { type: directory, path: from }
          copy: { type: directory, path: to, create: true }
          bucket: { type: s3, bucket: b, endpoint: 'http://127.0.0.1:9', region: auto, accessKeyId: '${env:CS_TEST_KEY_ID}', secretAccessKey: '${env:CS_TEST_SECRET}' }
        store: { providers: [local, copy] }
        jobs:
          - { type: migrate, name: local-copy, from: local, to: copy }
          - { type: migrate, name: upload, from: local, to: bucket }

        """

    let executable: String
    init() throws { executable = try ProcessRunner.builtProduct("cloudsync") }

    func cloudsync(_ arguments: [String], in directory: TemporaryDirectory, _ extra: [String: String] = [:])
        async throws -> ProcessResult
    {
        var environment = ProcessInfo.processInfo.environment
        for name in ["CS_TEST_KEY_ID", "CS_TEST_SECRET", "CREDS_STATE"] { environment[name] = nil }
        environment.merge(extra) { $1 }
        return try await ProcessRunner.run(
            executable, arguments, environment: environment, currentDirectory: directory.path)
    }

    @Test func historyOutboxPlanAndCompletionsWorkWithoutTheProvidersVariables() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("from", count: 3)
        try Self.pipeline.write(toFile: directory.file("p.yaml"), atomically: true, encoding: .utf8)
        // A run where the variables are set (only the local job: the bucket is nowhere), so there is history.
        let ran = try await cloudsync(
            ["run", "p.yaml", "--job", "local-copy"], in: directory,
            ["CS_TEST_KEY_ID": "AKIDEXAMPLE", "CS_TEST_SECRET": "never-printed-secret"])
        #expect(ran.status == 0, "\(ran.standardError)")

        let history = try await cloudsync(["history", "p.yaml", "--json"], in: directory)
        #expect(history.status == 0, "\(history.standardError)")
        #expect(history.standardOutput.contains("\"ok\""), "\(history.standardOutput)")
        #expect(history.standardError.contains("CS_TEST_KEY_ID (provider bucket, accessKeyId, p.yaml:7:"))
        #expect(history.standardError.contains("CS_TEST_SECRET (provider bucket, secretAccessKey"))

        let outbox = try await cloudsync(["outbox", "list", "p.yaml"], in: directory)
        #expect(outbox.status == 0, "\(outbox.standardError)")
        let discard = try await cloudsync(["outbox", "discard", "p.yaml", "--yes"], in: directory)
        #expect(discard.status == 0, "\(discard.standardError)")

        let plan = try await cloudsync(["plan", "p.yaml"], in: directory)
        #expect(plan.status == 0, "\(plan.standardError)")
        // The plan shows the references as written, never a value and never a false "given in the file".
        #expect(plan.standardOutput.contains("secretAccessKey ${env:CS_TEST_SECRET}"), "\(plan.standardOutput)")
        #expect(!plan.standardOutput.contains("given in the file"))

        let names = try await cloudsync(["__complete", "jobs", "p.yaml"], in: directory)
        #expect(names.standardOutput == "local-copy\nupload\n")
        #expect(names.standardError.isEmpty)

        // What reaches providers still refuses, naming each variable where the file uses it.
        for arguments in [["run", "p.yaml"], ["validate", "p.yaml"], ["outbox", "flush", "p.yaml"]] {
            let refused = try await cloudsync(arguments, in: directory)
            #expect(refused.status == 64, "\(arguments)")
            #expect(refused.standardError.contains("environment variable CS_TEST_KEY_ID is not set"), "\(arguments)")
            #expect(refused.standardError.contains("environment variable CS_TEST_SECRET is not set"), "\(arguments)")
        }
        // No output anywhere carries the secret given to the first run.
        for result in [history, outbox, plan, names] {
            #expect(!(result.standardOutput + result.standardError).contains("never-printed-secret"))
        }
    }

    /// `$${` is a literal `${`: an escaped reference names no variable, so none is reported unset, and one set
    /// beside an unset one is still expanded.
    @Test func onlyRealReferencesAreReportedUnset() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("from", count: 1)
        let text = Self.pipeline.replacingOccurrences(
            of: "accessKeyId: '${env:CS_TEST_KEY_ID}'", with: "accessKeyId: 'AKID$${env:NOT_A_VARIABLE}'")
        try text.write(toFile: directory.file("p.yaml"), atomically: true, encoding: .utf8)
        let plan = try await cloudsync(["plan", "p.yaml"], in: directory)
        #expect(plan.status == 0, "\(plan.standardError)")
        #expect(!plan.standardError.contains("NOT_A_VARIABLE"), "\(plan.standardError)")
        #expect(plan.standardError.contains("CS_TEST_SECRET (provider bucket, secretAccessKey"))
    }

    @Test func aVariableTheLocalStateNeedsIsStillRefusedByName() async throws {
        let directory = try TemporaryDirectory()
        try directory.fill("from", count: 1)
        let text = Self.pipeline.replacingOccurrences(of: "${env:CREDS_STATE:-state}", with: "${env:CREDS_STATE}")
        try text.write(toFile: directory.file("p.yaml"), atomically: true, encoding: .utf8)
        let history = try await cloudsync(["history", "p.yaml"], in: directory)
        #expect(history.status == 64)
        #expect(history.standardError.contains("environment variable CREDS_STATE is not set"))
        // An endpoint left unread would be refused by the provider: there the variable is needed, and named.
        let endpoint = Self.pipeline.replacingOccurrences(of: "'http://127.0.0.1:9'", with: "'${env:CS_TEST_URL}'")
        try endpoint.write(toFile: directory.file("e.yaml"), atomically: true, encoding: .utf8)
        let plan = try await cloudsync(["plan", "e.yaml"], in: directory)
        #expect(plan.status == 64)
        #expect(plan.standardError.contains("environment variable CS_TEST_URL is not set"), "\(plan.standardError)")
    }
}
