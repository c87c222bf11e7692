import CloudSync
import CloudSyncPipeline

/// `quota`: reads each provider's used and total space, warning above a fraction.
struct QuotaJob: JobType {
    struct Configuration: Sendable {
        var warnAbove: Double?
        var failOnWarning: Bool
    }

    static let providerCount = JobCount("providers", "providers whose space was read")
    static let warnings = JobCount("warnings", "providers using more than `warnAbove` of their space")

    let name = "quota"
    let summary = "report each provider's used and total space"
    let fields = [
        JobField("warnAbove", .fraction, summary: "warn when a provider uses more than this fraction of its space"),
        JobField("failOnWarning", .boolean, defaultValue: "false", summary: "end the job `failed` when one warns"),
    ]
    let counts = [providerCount, warnings]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        Configuration(warnAbove: values.number("warnAbove"), failOnWarning: values.boolean("failOnWarning") ?? false)
    }

    func providers(of configuration: Configuration, store: [String]) -> [String] { [] }

    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "report space per provider" + (configuration.warnAbove.map { ", warn above \($0)" } ?? "")
            + (configuration.failOnWarning ? ", fail on warning" : "")
    }

    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        var lines: [RunReport.QuotaLine] = []
        for quota in try await context.store.quota() {
            let fraction = quota.usedBytes.flatMap { used in
                quota.totalBytes.map { Double(used) / Double(max($0, 1)) }
            }
            lines.append(
                RunReport.QuotaLine(
                    provider: quota.provider, usedBytes: quota.usedBytes, totalBytes: quota.totalBytes,
                    fraction: fraction, warning: (fraction ?? 0) > (configuration.warnAbove ?? 1)))
        }
        report.entry.quota = lines
        let warned = lines.filter(\.warning).count
        report[Self.providerCount] = lines.count
        report[Self.warnings] = warned
        if configuration.failOnWarning && warned > 0 { report.status = .failed }
    }
}
