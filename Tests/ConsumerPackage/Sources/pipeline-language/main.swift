// A program that only reads and checks pipeline files, with a provider type and a job type of its own: it depends on
// the CloudSyncPipeline product alone, so it links no provider module, no SQLite and no libpq (scripts/check-consumer.sh
// checks the binary's symbols and libraries).
import CloudSync
import CloudSyncPipeline

/// A provider type of this program's: notes in a folder, kept in memory here.
struct NotesProviderFactory: ProviderFactory {
    struct Configuration: Sendable { var folder: String }
    var type: String { "notes" }
    var summary: String { "one note per key" }
    var fields: [ProviderField] { [ProviderField("folder", .text, required: true, summary: "the folder of notes")] }
    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(folder: values.text("folder") ?? "")
    }
    func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities(batchLimit: 100) }
    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        MemoryProvider(id: context.providerID, metrics: context.metrics)
    }
}

/// A job type of this program's: it only names the provider it would look at.
struct TallyJob: JobType {
    static let tallied = JobCount("tallied", "keys looked at")
    let name = "tally"
    let summary = "look at every key of one provider"
    let fields = [JobField("provider", .provider, required: true, summary: "the provider to look at")]
    let counts = [tallied]
    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> String {
        values.text("provider") ?? ""
    }
    func providers(of configuration: String, store: [String]) -> [String] { [configuration] }
    func plan(_ configuration: String, paths: PlanPaths) -> String { "tally the keys of \(configuration)" }
    func run(_ configuration: String, in context: JobContext, report: inout JobReport) async throws(CloudSyncError) {}
}

var providers = ProviderRegistry()
providers.register(NotesProviderFactory())
var jobs = JobRegistry()
jobs.register(TallyJob())

@MainActor func load(_ text: String) throws(PipelineError) -> PipelineSpec {
    try PipelineLoader.load(
        source: text, file: "notes.yaml", directory: "/nowhere", registry: providers, jobTypes: jobs)
}

let good = try load(
    """
    version: 1
    name: notes
    providers:
      inbox: { type: notes, folder: inbox }
    store: { providers: [inbox] }
    jobs:
      - { type: tally, provider: inbox }
    """)
let compiled = try PipelineCompiler.compile(good, environment: [:])
print(
    "valid: \(good.name) \(compiled.spec.store.providers) \(good.jobs.map { $0.job.plan(paths: PlanPaths(directory: "/")) })"
)

do {
    _ = try load(
        """
        version: 1
        name: notes
        providers:
          inbox: { type: notes }
          cloud: { type: s3, bucket: b }
        store: { providers: [inbox] }
        jobs:
          - { type: tally, provider: outbox }
        """)
} catch {
    for diagnostic in error.diagnostics {
        print("invalid: \(diagnostic.mark.line):\(diagnostic.mark.column) \(diagnostic.message)")
    }
}
