import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import Foundation

// The pipeline language knows no job type of its own: its loader and schemas take a registry. These overloads give
// them the built-in job types, which is what `cloudsync` and most programs embedding the runner want.

extension PipelineLoader {
    /// Loads the file at `path` with the built-in job types (``BuiltInJobs/registry``).
    public static func load(
        path: String, registry: ProviderRegistry,
        environment: [String: String] = ProcessInfo.processInfo.environment, unsetVariables: UnsetVariables = .refused
    ) throws(PipelineError) -> PipelineSpec {
        try load(
            path: path, registry: registry, jobTypes: BuiltInJobs.registry, environment: environment,
            unsetVariables: unsetVariables)
    }

    /// Loads pipeline text with the built-in job types (``BuiltInJobs/registry``).
    public static func load(
        source: String, file: String, directory: String, registry: ProviderRegistry,
        environment: [String: String] = [:], unsetVariables: UnsetVariables = .refused
    ) throws(PipelineError) -> PipelineSpec {
        try load(
            source: source, file: file, directory: directory, registry: registry, jobTypes: BuiltInJobs.registry,
            environment: environment, unsetVariables: unsetVariables)
    }
}

extension PipelineSchema {
    /// The schema for pipelines whose providers come from `registry`, with the built-in job types.
    public static func json(registry: ProviderRegistry) -> String {
        json(registry: registry, jobTypes: BuiltInJobs.registry)
    }
}

extension ReportSchema {
    /// The schema of reports of pipelines with the built-in job types: `schemas/report.schema.json`.
    public static func json() -> String { json(jobTypes: BuiltInJobs.registry) }
}
