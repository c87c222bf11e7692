import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// Numbered migrations against both state stores: the record lives in the state (SQLite or a PostgreSQL schema), and
/// of runners started at once exactly one applies each migration; the others are refused by the run lock and apply
/// nothing.
@Suite struct MigrationStateTests {
    static let source = """
        version: 1
        name: migrated
        providers:
          app: { type: sqlite, path: app.db, create: true }
        store: { providers: [app] }
        migrations:
          - id: 001-rename
            on: app
            steps:
              - rename: { from: "old.*", to: "new.{1}" }
          - id: 002-wrap
            on: app
            steps:
              - transform: { keys: "new.*", jq: '{wrapped: .}' }
        report: { path: report.json }
        """

    private func compile(in directory: TemporaryDirectory, state: TestState) throws -> CompiledPipeline {
        let environment = state.environment()
        let spec = try PipelineLoader.load(
            source: state.applied(to: Self.source), file: "p.yaml", directory: directory.path,
            registry: BuiltInProviders.registry, environment: environment)
        return try PipelineCompiler.compile(spec, environment: environment)
    }

    @Test(arguments: StateKind.allCases)
    func ofRunnersStartedAtOnceExactlyOneAppliesEachMigration(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let app = try SQLiteProvider(id: "app", path: directory.file("app.db"))
        for result in try await app.set((0..<200).map { KeyValue("old.k\($0)", "\($0)") }) { try result.get() }
        await app.close()
        let compiled = try compile(in: directory, state: state)
        let options = {
            var options = RunOptions()
            options.reportPath = "-"
            return options
        }()
        let outcomes = await withTaskGroup(of: Result<RunOutcome, RunRefusal>.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    do throws(RunRefusal) {
                        return .success(try await PipelineRunner(compiled, options: options).run())
                    } catch {
                        return .failure(error)
                    }
                }
            }
            var outcomes: [Result<RunOutcome, RunRefusal>] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        // Each runner either applied both migrations or was refused by the lock; none applied a step twice.
        let ran = outcomes.compactMap { try? $0.get() }
        let applied = ran.filter { !$0.report.jobs.isEmpty }
        #expect(applied.count >= 1)
        #expect(ran.allSatisfy { $0.status == .ok }, "\(ran.map(\.report.jobs))")
        #expect(applied.map { $0.report.jobs.map(\.name) }.first == ["001-rename step 1", "002-wrap step 1"])
        #expect(applied.count == 1 || applied.dropFirst().allSatisfy { $0.report.jobs.isEmpty })
        let written = applied.flatMap(\.report.jobs).reduce(0) {
            $0 + ($1.counts["moved"] ?? 0) + ($1.counts["copied"] ?? 0)
        }
        #expect(written == 400, "200 renamed and 200 wrapped, once each")
        let ledger = try PipelineMigrations.ledger(of: compiled)
        #expect(ledger.lines.map(\.standing) == [.applied, .applied])
        #expect(ledger.lines.allSatisfy { $0.appliedBy?.contains("@") == true && $0.appliedAt != nil })
        let reopened = try SQLiteProvider(id: "app", path: directory.file("app.db"))
        let keys = try await listEveryKey(of: reopened, pageSize: 100)
        #expect(keys.count == 200 && keys.allSatisfy { $0.hasPrefix("new.") })
        #expect(try await reopened.get(["new.k7"]).first?.get() == #"{"wrapped":7}"#)
        await reopened.close()
    }
}
