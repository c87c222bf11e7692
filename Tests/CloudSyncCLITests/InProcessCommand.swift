import Synchronization

@testable import CloudSyncCLI

/// Runs `cloudsync` in this process with `environment` alone: its exit status and what it printed on standard output
/// and standard error.
func inProcessCloudsync(_ arguments: [String], environment: [String: String] = [:]) async -> (
    status: ExitCode, output: String, errors: String
) {
    let output = Mutex("")
    let errors = Mutex("")
    let tool = CommandLineTool(
        standardOutput: { text in output.withLock { $0 += text } },
        standardError: { text in errors.withLock { $0 += text } }, environment: environment)
    let status = await tool.run(arguments)
    return (status, output.withLock { $0 }, errors.withLock { $0 })
}
