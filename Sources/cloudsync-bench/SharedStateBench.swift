// The shared-state benches: a migration split into 8 ranges between 4 runner processes, their state in PostgreSQL,
// beside the same migration run whole by one runner with its state in SQLite. On two cores the figure shows the
// coordination's overhead, not a speedup: the four runners share the same two cores.
import CloudSync
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation

/// The environment variable the benches' pipelines read the PostgreSQL URL from.
let benchStateVariable = "CLOUDSYNC_BENCH_STATE_URL"

/// One throwaway PostgreSQL server for every bench that needs one, its URL in ``benchStateVariable`` for the
/// children the benches start.
func benchPostgres() async throws -> String {
    if let url = ProcessInfo.processInfo.environment[benchStateVariable] { return url }
    let server = try await PostgresServer.start()
    benchServers.withLock { $0.append(server) }
    setenv(benchStateVariable, server.url, 1)
    return server.url
}

/// Kept alive until the bench exits (its pipe closing stops it).
private let benchServers = Protected<[PostgresServer]>([])

/// Runs a pipeline in a child the benches start (`--pipeline-child FILE [--run-id ID [--join]] [--job NAME]`, the
/// last running only that job, without its needs), then exits; a joining child waits up to a minute for the run to
/// start.
///
/// The pipeline reads the process's environment; the exit status is 0 when it ended `ok`. Returns at once in any
/// other process.
func pipelineChild(_ arguments: [String]) async {
    guard let index = arguments.firstIndex(of: "--pipeline-child"), index + 1 < arguments.count else { return }
    do {
        let environment = ProcessInfo.processInfo.environment
        let spec = try PipelineLoader.load(
            path: arguments[index + 1], registry: BuiltInProviders.registry, environment: environment)
        var options = RunOptions()
        options.join = arguments.contains("--join")
        options.joinWait = .seconds(60)
        if let named = arguments.firstIndex(of: "--run-id"), named + 1 < arguments.count {
            options.runID = arguments[named + 1]
        }
        if let job = arguments.firstIndex(of: "--job"), job + 1 < arguments.count {
            options.jobNames = [arguments[job + 1]]
            options.runNeeds = false
        }
        let outcome = try await PipelineRunner(
            try PipelineCompiler.compile(spec, environment: environment), options: options
        )
        .run()
        if outcome.status != .ok { FileHandle.standardError.write(Data(outcome.report.json().utf8)) }
        if arguments.contains("--print-report") { FileHandle.standardOutput.write(Data(outcome.report.json().utf8)) }
        exit(outcome.status == .ok ? 0 : 1)
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(2)
    }
}

func benchShardedMigrate(_ context: BenchContext) async throws -> [BenchRow] {
    let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 20_000
    _ = try await benchPostgres()
    let directory = try context.directory("sharded")
    let source = try DirectoryProvider(root: directory + "/from")
    let kilobyte = String(repeating: "k", count: 1024)
    for start in stride(from: 0, to: count, by: 1000) {
        _ = try await source.set(
            (start..<min(start + 1000, count)).map { KeyValue(String(format: "settings.item.%06d", $0), kilobyte) })
    }
    await source.close()
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]

    var four: [Double] = []
    var one: [Double] = []
    for run in 0..<context.runs {
        // A new destination and a new schema each run: every run copies every key.
        four.append(
            try timedRunners(
                executable, try shardedPipeline("shards4r\(run)", shards: 8, in: directory), copies: 4, join: true))
        one.append(
            try timedRunners(
                executable, try shardedPipeline("whole\(run)", shards: nil, in: directory), copies: 1, join: false))
    }
    return [
        BenchRow(
            measure:
                "migrate \(count.formatted()) × 1 KB directory → directory, 4 runners × 8 ranges (PostgreSQL state)",
            unit: "s", ours: median(four), peerName: "1 runner, whole (SQLite state)", peer: median(one), target: nil,
            runs: context.runs)
    ]
}

/// Writes the pipeline `name` into `directory`: a migrate of `from` into a directory of its own, split into
/// `shards` ranges with its state in PostgreSQL, or whole (`shards` nil) with its state in SQLite; returns its path.
private func shardedPipeline(_ name: String, shards: Int?, in directory: String) throws -> String {
    let file = directory + "/\(name).yaml"
    let state =
        shards == nil
        ? "state: \(directory)/state-\(name)"
        : "state: { postgresql: \"${env:\(benchStateVariable)}\", schema: \(name) }"
    try """
    version: 1
    name: \(name)
    \(state)
    providers:
      from: { type: directory, path: from }
      to: { type: directory, path: to-\(name), create: true }
    store: { providers: [to] }
    jobs:
      - { type: migrate, from: from, to: to\(shards.map { ", shards: \($0)" } ?? "") }
    report: { path: \(directory)/\(name)-report.json }
    """.write(toFile: file, atomically: true, encoding: .utf8)
    return file
}

/// Runs `copies` children of `executable` on `file` at once and returns the wall time until the last ends.
private func timedRunners(_ executable: String, _ file: String, copies: Int, join: Bool) throws -> Double {
    let started = ContinuousClock.now
    // One starts the run; with `join`, the others join it by name.
    let name = "bench-\(UUID().uuidString)"
    let processes = try (0..<copies).map { index in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments =
            ["--pipeline-child", file] + (join ? ["--run-id", name] + (index == 0 ? [] : ["--join"]) : [])
        try process.run()
        return process
    }
    for process in processes {
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CloudSyncError(.config, "a runner of \(file) exited \(process.terminationStatus)")
        }
    }
    return seconds(ContinuousClock.now - started)
}
