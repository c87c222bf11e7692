import CloudSync

/// `verify`: reads every value of one provider and checks its codec decodes it; values are never shown.
struct VerifyJob: JobType {
    static let checked = JobCount("checked", "keys read")
    static let ok = JobCount("ok", "values that decoded")
    static let failed = JobCount("failed", "values that could not be read or decoded")

    let name = "verify"
    let summary = "check every value of one provider decodes with its codec"
    let fields = [JobField("provider", .provider, required: true, summary: "the provider to check")]
    let counts = [checked, ok, failed]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> String {
        values.text("provider") ?? ""
    }

    func providers(of provider: String, store: [String]) -> [String] { [provider] }

    func plan(_ provider: String, paths: PlanPaths) -> String { "check every value of \(provider) decodes" }

    func run(_ provider: String, in context: JobContext, report: inout JobReport) async throws(CloudSyncError) {
        let result = try await context.store.maintenance.verify(provider: provider)
        report.record(result.failed)
        report[Self.checked] = result.checked
        report[Self.ok] = result.ok
        report[Self.failed] = result.failed.count
    }
}
