import CloudSync
import CloudSyncPostgres
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState
@testable import CloudSyncRunner

private func compile(_ source: String, in directory: TemporaryDirectory, environment: [String: String]) throws
    -> CompiledPipeline
{
    let spec = try PipelineLoader.load(
        source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
        environment: environment)
    return try PipelineCompiler.compile(spec, environment: environment)
}

/// A pipeline whose state is the schema `schema` of the server `${env:STATE_URL}` names.
private func sharedPipeline(schema: String, name: String = "shared", jobs: String = "") -> String {
    """
    version: 1
    name: \(name)
    state: { postgresql: "${env:STATE_URL}", schema: \(schema) }
    providers:
      local: { type: memory }
    store:
      providers: [local]
    \(jobs)
    """
}

/// The run lock, the errors and the report of a pipeline whose state is in PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct SharedStateTests {
    /// Two "machines" (two working directories, so nothing on disk is shared) start the same pipeline at the same
    /// moment, 50 times: each time exactly one runs and the other is refused naming the holder. (Two processes race
    /// 200 times in the stress suite, `RunLockRaceStressTests`.)
    @Test func ofTwoRunsStartedAtOnceOnTwoMachinesExactlyOneRuns() async throws {
        let server = try await PostgresServer.shared()
        let schema = PostgresServer.uniqueName("race")
        let environment = ["STATE_URL": server.url]
        let machines = try (0..<2).map { _ in
            try compile(sharedPipeline(schema: schema), in: try TemporaryDirectory(), environment: environment)
        }
        // Set up once, so every try races for the lock rather than for the first migration.
        try await RunSession.open(machines[0]).close()
        for attempt in 0..<50 {
            let outcomes = await withTaskGroup(of: Result<RunSession, RunRefusal>.self) { group in
                for machine in machines {
                    group.addTask {
                        do throws(RunRefusal) { return .success(try await RunSession.open(machine)) } catch {
                            return .failure(error)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let running = outcomes.compactMap { try? $0.get() }
            let refusals = outcomes.compactMap { outcome -> RunRefusal? in
                if case .failure(let refusal) = outcome { return refusal }
                return nil
            }
            #expect(running.count == 1, "try \(attempt): \(running.count) runs started")
            for refusal in refusals {
                guard case .lockedElsewhere(_, let lock) = refusal else {
                    Issue.record("try \(attempt): refused for another reason: \(refusal)")
                    continue
                }
                #expect(lock.contains("schema \(schema)") && !lock.contains(server.password))
            }
            for session in running { await session.close() }
            if running.count != 1 { break }
        }
    }

    @Test func aServerThatDoesNotAnswerIsOfflineAndTheRunReportsItWithoutThePassword() async throws {
        let directory = try TemporaryDirectory()
        let url = "postgresql://cloudsync:hunter2-never-shown@127.0.0.1:1/ops"
        let compiled = try compile(
            sharedPipeline(schema: "cloudsync", jobs: "jobs:\n  - { type: flush }\n"), in: directory,
            environment: ["STATE_URL": url])
        let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
        #expect(outcome.status == .error)
        #expect(outcome.reportPath == nil, "with its state in PostgreSQL, a run keeps nothing on disk: stdout")
        let error = try #require(outcome.report.error)
        #expect(error.code == "ERR_OFFLINE")
        #expect(error.message.contains("127.0.0.1:1/ops") && error.message.contains("schema cloudsync"))
        #expect(!outcome.report.json().contains("hunter2"))
        #expect(outcome.report.jobs.map(\.status) == [.skipped])
        #expect(!FileManager.default.fileExists(atPath: compiled.spec.state), "no state directory was made")
    }

    @Test func aRefusedLoginAndAMissingPrivilegeAreConfigurationErrorsNamingTheServer() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let wrong = server.url(user: "cloudsync", password: "wrong-\(UUID().uuidString)")
        let refused = try await PipelineRunner(
            try compile(sharedPipeline(schema: "cloudsync"), in: directory, environment: ["STATE_URL": wrong]),
            options: RunOptions()
        ).run()
        #expect(refused.report.error?.code == "ERR_CONFIG")
        #expect(refused.report.error?.message.contains("127.0.0.1:\(server.port)/postgres") == true)
        #expect(refused.report.error?.message.contains("password authentication failed") == true)
        #expect(!refused.report.json().contains(wrong) && !refused.report.json().contains("wrong-"))

        // A role that may connect but not create a schema, naming a schema nobody made.
        let role = PostgresServer.uniqueName("role")
        let admin = try await PostgresConnection.connect(server.url)
        try await admin.execute("CREATE ROLE \(role) LOGIN PASSWORD 'role-secret-1234'")
        await admin.close()
        let limited = server.url(user: role, password: "role-secret-1234")
        let denied = try await PipelineRunner(
            try compile(
                sharedPipeline(schema: PostgresServer.uniqueName("none")), in: directory,
                environment: ["STATE_URL": limited]), options: RunOptions()
        ).run()
        let error = try #require(denied.report.error)
        #expect(error.code == "ERR_CONFIG")
        #expect(error.message.contains("SQLSTATE 42501") && error.message.contains("grant it"))
        #expect(!denied.report.json().contains("role-secret-1234"))
    }

    /// The least privileges the README names are enough: CONNECT on the database, USAGE and CREATE on a schema an
    /// administrator made for the role, nothing on the database itself.
    @Test func aRoleWithOnlyItsSchemaRunsAndMigrates() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let role = PostgresServer.uniqueName("runner")
        let schema = PostgresServer.uniqueName("own")
        let admin = try await PostgresConnection.connect(server.url)
        try await admin.execute("CREATE ROLE \(role) LOGIN PASSWORD 'runner-secret-99'")
        try await admin.execute("CREATE SCHEMA \(schema)")
        try await admin.execute("GRANT USAGE, CREATE ON SCHEMA \(schema) TO \(role)")
        await admin.close()
        let environment = ["STATE_URL": server.url(user: role, password: "runner-secret-99")]
        let compiled = try compile(
            sharedPipeline(schema: schema, jobs: "jobs:\n  - { type: flush }\n"), in: directory,
            environment: environment)
        for _ in 0..<2 {
            let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
            #expect(outcome.status == .ok, "\(outcome.report.error?.message ?? "")")
        }
        let state = try PostgresStateDatabase(
            try #require(compiled.spec.sharedState), pipeline: "shared", readOnly: true)
        #expect(state.isSetUp)
        #expect(try state.runs(limit: 10).count == 2)
        state.close()
    }

    /// A dry run of a pipeline whose schema no runner has set up writes nothing there, not even the schema.
    @Test func aDryRunOfANewSchemaCreatesNothing() async throws {
        let server = try await PostgresServer.shared()
        let directory = try TemporaryDirectory()
        let schema = PostgresServer.uniqueName("dry")
        let compiled = try compile(
            sharedPipeline(schema: schema, jobs: "jobs:\n  - { type: flush }\n"), in: directory,
            environment: ["STATE_URL": server.url])
        var options = RunOptions()
        options.dryRun = true
        let outcome = try await PipelineRunner(compiled, options: options).run()
        #expect(outcome.status == .ok)
        let admin = try await PostgresConnection.connect(server.url)
        let found = try await admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [.text(schema)])
        await admin.close()
        #expect(found.rows.isEmpty)
    }
}

@Suite struct SharedStatePlanTests {
    @Test func thePlanNamesTheServerAndSchemaNeverTheURL() throws {
        let directory = try TemporaryDirectory()
        let url = "postgresql://runner:s3cret-pass@db.internal:6432/ops?sslmode=require"
        let compiled = try compile(sharedPipeline(schema: "nightly"), in: directory, environment: ["STATE_URL": url])
        let plan = PipelinePlan(compiled)
        #expect(plan.state == "PostgreSQL db.internal:6432/ops, schema nightly")
        #expect(!plan.text().contains("s3cret") && !plan.json().contains("s3cret") && !plan.json().contains("runner"))
    }
}
