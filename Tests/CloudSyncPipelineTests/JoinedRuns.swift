import CloudSyncPipeline

/// The outcomes of `runners` runners of `compiled` started at once, each with `--join`, in the order they ended.
///
/// As runners on several machines would: one starts the run, the others join it.
func joinedRuns(of compiled: CompiledPipeline, runners: Int) async throws -> [RunOutcome] {
    var joining = RunOptions()
    joining.join = true
    let options = joining
    return try await withThrowingTaskGroup(of: RunOutcome.self) { group in
        for _ in 0..<runners { group.addTask { try await PipelineRunner(compiled, options: options).run() } }
        return try await group.reduce(into: []) { $0.append($1) }
    }
}
