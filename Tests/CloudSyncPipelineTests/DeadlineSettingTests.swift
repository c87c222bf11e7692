import CloudSync
import CloudSyncTesting
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// The store's deadline: the file's `store.timeoutMs`, else the host's `CLOUDSYNC_TIMEOUT_MS`, else 15 s; and every
/// run says which it had.
@Suite struct DeadlineSettingTests {
    static func load(timeoutMs: Int? = nil, environment: [String: String], directory: String = "/tmp") throws
        -> PipelineSpec
    {
        try PipelineLoader.load(
            source: """
                version: 1
                name: p
                providers:
                  m: { type: memory }
                store: { providers: [m]\(timeoutMs.map { ", timeoutMs: \($0)" } ?? "") }

                """, file: "p.yaml", directory: directory, registry: BuiltInProviders.registry, environment: environment
        )
    }

    static func plan(_ spec: PipelineSpec) throws -> String {
        PipelinePlan(try PipelineCompiler.compile(spec, environment: [:])).text()
    }

    @Test func withoutEitherTheDeadlineIsFifteenSeconds() throws {
        let spec = try Self.load(environment: [:])
        #expect(spec.store.timeoutMs == 15_000 && !spec.store.timeoutFromEnvironment)
        #expect(try PipelineCompiler.compile(spec, environment: [:]).storeOptions.timeout == .seconds(15))
        #expect(try Self.plan(spec).contains("  timeout: 15000 ms\n"))
    }

    @Test(arguments: ["none", "0"])
    func theHostCanLiftTheDeadlineOfEveryFileThatSetsNone(_ value: String) throws {
        let spec = try Self.load(environment: ["CLOUDSYNC_TIMEOUT_MS": value])
        #expect(spec.store.timeoutMs == 0 && spec.store.timeoutFromEnvironment)
        #expect(try PipelineCompiler.compile(spec, environment: [:]).storeOptions.timeout == nil)
        #expect(try Self.plan(spec).contains("  timeout: none (CLOUDSYNC_TIMEOUT_MS)\n"))
    }

    @Test func theHostSetsAnotherDeadlineAndTheFileStillWins() throws {
        let hosted = try Self.load(environment: ["CLOUDSYNC_TIMEOUT_MS": "60000"])
        #expect(try PipelineCompiler.compile(hosted, environment: [:]).storeOptions.timeout == .seconds(60))
        #expect(try Self.plan(hosted).contains("  timeout: 60000 ms (CLOUDSYNC_TIMEOUT_MS)\n"))
        let pinned = try Self.load(timeoutMs: 2_000, environment: ["CLOUDSYNC_TIMEOUT_MS": "none"])
        #expect(pinned.store.timeoutMs == 2_000 && !pinned.store.timeoutFromEnvironment)
        #expect(try PipelineCompiler.compile(pinned, environment: [:]).storeOptions.timeout == .seconds(2))
    }

    @Test func aValueThatIsNoDeadlineIsRefusedNamingTheVariable() throws {
        let error = #expect(throws: PipelineError.self) {
            try Self.load(environment: ["CLOUDSYNC_TIMEOUT_MS": "15s"])
        }
        let message = error?.diagnostics.first?.description ?? ""
        #expect(message.hasPrefix("p.yaml:5:8: error: CLOUDSYNC_TIMEOUT_MS is `15s`: give the store's deadline"))
    }

    @Test func theReportSaysWhichDeadlineTheRunHad() async throws {
        for (environment, expected) in [([String: String](), 15_000), (["CLOUDSYNC_TIMEOUT_MS": "none"], 0)] {
            let directory = try TemporaryDirectory()
            let spec = try Self.load(environment: environment, directory: directory.path)
            let report = try await PipelineRunner(
                try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions()
            ).run().report
            #expect(report.timeoutMs == expected)
            #expect(report.json().contains("\"timeoutMs\" : \(expected)"))
        }
    }
}
