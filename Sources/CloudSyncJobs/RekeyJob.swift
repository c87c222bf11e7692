import CloudSync
import CloudSyncPipeline

/// `rekey`: re-encrypts every value of one provider under its codec's current key.
struct RekeyJob: JobType {
    static let rekeyed = JobCount("rekeyed", "values re-encrypted under the current key")
    static let skipped = JobCount("skipped", "values already under the current key")
    static let failed = JobCount("failed", "values that could not be decoded or written")
    static let queued = JobCount("queued", "always 0: re-keying writes directly, never through the outbox")

    let name = "rekey"
    let summary = "re-encrypt every value of one provider under its codec's current key"
    let fields = [JobField("provider", .provider, required: true, summary: "the provider to re-key")]
    let counts = [rekeyed, skipped, failed, queued]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> String {
        values.text("provider") ?? ""
    }

    func providers(of provider: String, store: [String]) -> [String] { [provider] }

    func plan(_ provider: String, paths: PlanPaths) -> String {
        "re-encrypt every value of \(provider) under the current key"
    }

    func run(_ provider: String, in context: JobContext, report: inout JobReport) async throws(CloudSyncError) {
        let result = try await context.store.maintenance.rekey(provider: provider)
        report.record(result.failed)
        report[Self.rekeyed] = result.copied.count
        report[Self.skipped] = result.skipped.count
        report[Self.failed] = result.failed.count
    }
}
