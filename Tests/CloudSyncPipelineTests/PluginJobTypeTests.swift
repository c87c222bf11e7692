import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

/// A job type from outside the pipeline module, through public API only (this file imports the module without
/// `@testable`): registered, then loaded and checked field by field, planned, in both schemas, run and reported.
@Suite struct PluginJobTypeTests {
    /// Counts one provider's keys that start with a prefix.
    struct CountPrefixJob: JobType {
        struct Configuration: Sendable {
            var provider: String
            var prefix: String
        }

        static let matching = JobCount("matching", "keys starting with the prefix")
        static let others = JobCount("others", "every other key")

        let name = "countPrefix"
        let summary = "count one provider's keys that start with a prefix"
        let fields = [
            JobField("provider", .provider, required: true, summary: "the provider counted"),
            JobField("prefix", .choice(["prefs.", "cache."]), defaultValue: "prefs.", summary: "the prefix"),
        ]
        let counts = [matching, others]

        func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
            Configuration(provider: values.text("provider") ?? "", prefix: values.text("prefix") ?? "prefs.")
        }

        func providers(of configuration: Configuration, store: [String]) -> [String] { [configuration.provider] }

        func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
            "count keys of \(configuration.provider) starting with \(configuration.prefix)"
        }

        func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
            async throws(CloudSyncError)
        {
            var cursor: String?
            repeat {
                let page = try await context.store.keyPage(of: configuration.provider, after: cursor, limit: 2)
                for key in page.keys {
                    report.add(1, to: key.hasPrefix(configuration.prefix) ? Self.matching : Self.others)
                }
                cursor = page.nextCursor
            } while cursor != nil
        }
    }

    static var jobTypes: JobRegistry {
        var registry = BuiltInJobs.registry
        registry.register(CountPrefixJob())
        return registry
    }

    static func pipeline(_ job: String) -> String {
        """
        version: 1
        name: plugin
        providers:
          mem: { type: memory, items: { prefs.lang: en, prefs.font: serif, cache.a: x } }
        store: { providers: [mem] }
        jobs:
          \(job)
        """
    }

    @Test func aRegisteredJobTypeIsLoadedPlannedRunAndReported() async throws {
        let directory = try TemporaryDirectory()
        let spec = try PipelineLoader.load(
            source: Self.pipeline("- { name: count, type: countPrefix, provider: mem }"), file: "p.yaml",
            directory: directory.path, registry: BuiltInProviders.registry, jobTypes: Self.jobTypes)
        let compiled = try PipelineCompiler.compile(spec, environment: [:])
        #expect(PipelinePlan(compiled).jobs.map(\.summary) == ["count keys of mem starting with prefs."])
        var options = RunOptions()
        options.reportPath = directory.file("report.json")
        let report = try await PipelineRunner(compiled, options: options).run().report
        #expect(report.jobs.first?.counts == ["matching": 2, "others": 1])
        #expect(report.jobs.first?.type == "countPrefix")
        #expect(report.status == .ok)

        // The report file validates against the report schema generated with the type registered, and is then
        // removed: the suite checks every other report against the schema of the built-in types alone.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let schema = directory.file("report.schema.json")
        try ReportSchema.json(jobTypes: Self.jobTypes).write(toFile: schema, atomically: true, encoding: .utf8)
        let check = try await ProcessRunner.run(
            root + "/.build/pyenv/bin/check-jsonschema", ["--schemafile", schema, directory.file("report.json")])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
        try FileManager.default.removeItem(atPath: directory.file("report.json"))
    }

    @Test func itsFieldsAreCheckedOneByOneWithDidYouMean() throws {
        func errors(_ job: String) -> [String] {
            do {
                _ = try PipelineLoader.load(
                    source: Self.pipeline(job), file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry,
                    jobTypes: Self.jobTypes)
                return []
            } catch {
                return error.diagnostics.map(\.message)
            }
        }
        #expect(
            errors("- { type: countPrefix, provider: mem, prefx: prefs. }")
                == ["unknown field `prefx` in job 1 (countPrefix); did you mean `prefix`?"])
        #expect(
            errors("- { type: countPrefix, provider: men }") == ["unknown provider `men`; did you mean `mem`?"])
        #expect(
            errors("- { type: countPrefix, provider: mem, prefix: cach. }")
                == [
                    "`prefix` in job 1 (countPrefix) must be one of prefs., cache.; found \"cach.\"; did you mean cache.?"
                ])
        #expect(errors("- { type: countPrefix }") == ["job 1 (countPrefix) needs `provider`"])
        #expect(
            errors("- { type: countPrefx, provider: mem }") == [
                "unknown job type \"countPrefx\"; did you mean countPrefix?"
            ])
    }

    @Test func bothSchemasDescribeIt() throws {
        let pipeline = try #require(
            try JSONSerialization.jsonObject(
                with: Data(PipelineSchema.json(registry: BuiltInProviders.registry, jobTypes: Self.jobTypes).utf8))
                as? [String: Any])
        let job = try #require((pipeline["$defs"] as? [String: Any])?["job"] as? [String: Any])
        let types = ((job["properties"] as? [String: Any])?["type"] as? [String: Any])?["enum"] as? [String]
        #expect(types?.contains("countPrefix") == true)
        #expect(
            PipelineSchema.json(registry: BuiltInProviders.registry, jobTypes: Self.jobTypes).contains("\"prefix\": {"))

        let report = ReportSchema.json(jobTypes: Self.jobTypes)
        #expect(try JSONSerialization.jsonObject(with: Data(report.utf8)) is [String: Any])
        #expect(report.contains("\"matching\": { \"description\": \"Keys starting with the prefix.\""))
        #expect(PipelineReference.jobTable(jobTypes: Self.jobTypes).contains("| **`type: countPrefix`** |"))
    }
}
