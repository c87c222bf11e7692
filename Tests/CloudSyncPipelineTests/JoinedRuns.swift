import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// The outcomes of `runners` runners of `compiled` started at once, in the order they ended: one starts a run
/// named for the call, the others join it by name (`--join --run-id ID --join-wait 60`), as a scheduler's pods would.
///
/// A joiner that looks only after the run has finished does nothing (its outcome names the finished run).
func joinedRuns(of compiled: CompiledPipeline, runners: Int) async throws -> [RunOutcome] {
    let name = "joined-\(UUID().uuidString)"
    var starting = RunOptions()
    starting.runID = name
    var joining = starting
    joining.join = true
    joining.joinWait = .seconds(60)
    let (starter, joiner) = (starting, joining)
    return try await withThrowingTaskGroup(of: RunOutcome.self) { group in
        for index in 0..<runners {
            group.addTask { try await PipelineRunner(compiled, options: index == 0 ? starter : joiner).run() }
        }
        return try await group.reduce(into: []) { $0.append($1) }
    }
}
