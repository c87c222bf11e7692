import CloudSync
import CloudSyncPipeline

/// `flush`: retries the outbox's due writes now.
struct FlushJob: JobType {
    static let drained = JobCount("drained", "queued writes delivered")
    static let remaining = JobCount("remaining", "queued writes still waiting")
    static let dropped = JobCount("dropped", "queued writes given up")

    let name = "flush"
    let summary = "retry the outbox's due writes"
    let fields: [JobField] = []
    let counts = [drained, remaining, dropped]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) {}

    func providers(of configuration: Void, store: [String]) -> [String] { [] }

    func plan(_ configuration: Void, paths: PlanPaths) -> String { "retry the outbox's due writes" }

    func run(_ configuration: Void, in context: JobContext, report: inout JobReport) async throws(CloudSyncError) {
        let result = try await context.store.flushOutbox()
        report[Self.drained] = result.drained
        report[Self.remaining] = result.remaining
        report[Self.dropped] = result.dropped
    }
}
