import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// Two `cloudsync run` processes of one pipeline started at the same moment: exactly one proceeds, the other exits
/// with the "locked" status, whether the state directory is new or holds a lock file left by a run that is gone.
///
/// Each pipeline's only remote provider is a bucket on a loopback server that holds every request until the pair's
/// other process has exited, so a run that got in cannot finish before its rival has tried the lock: two runs that
/// both got in would both wait there, and the pair is counted as a failure.
///
/// The runs are started under `nice`, so the hundreds of processes yield the processor to anything else running.
@Suite(.serialized, .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct RunLockRaceStressTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// What a lock file left behind may hold: the id of a process that is gone, nothing (a run killed before it wrote
    /// its id), or the id of a live process that is not a run (the id was reused).
    enum Leftover: CaseIterable {
        case deadProcess, empty, unrelatedLiveProcess

        var text: String {
            switch self {
            case .deadProcess: "999999\n"
            case .empty: ""
            case .unrelatedLiveProcess: "\(getpid())\n"
            }
        }
    }

    /// Pairs a race runs: 200 under `CLOUDSYNC_STRESS=full`.
    static let pairs = StressSize.pick(ci: 80, full: 200)

    @Test func exactlyOneOfTwoSimultaneousRunsProceeds() async throws {
        let failures = try await offPool { try race(pairs: Self.pairs, leftover: nil) }
        #expect(failures.isEmpty, "\(failures.count) of \(Self.pairs) pairs: \(failures.prefix(5))")
    }

    @Test func exactlyOneOfTwoSimultaneousRunsProceedsOverALeftLockFile() async throws {
        let failures = try await offPool { try race(pairs: Self.pairs, leftover: Leftover.allCases) }
        #expect(failures.isEmpty, "\(failures.count) of \(Self.pairs) pairs: \(failures.prefix(5))")
    }

    /// Two "machines" (two working directories, nothing on disk shared) run one pipeline whose state is in
    /// PostgreSQL: the advisory lock lets exactly one in, every time.
    @Test func exactlyOneOfTwoRunsOnTwoMachinesSharingPostgreSQLProceeds() async throws {
        let url = try await PostgresServer.shared().url
        let schema = PostgresServer.uniqueName("race")
        let failures = try await offPool { try race(pairs: Self.pairs, leftover: nil, shared: (url, schema)) }
        #expect(failures.isEmpty, "\(failures.count) of \(Self.pairs) pairs: \(failures.prefix(5))")
    }

    /// Races `pairs` pairs, a few at a time, and returns a line for each pair where not exactly one run proceeded.
    ///
    /// With `shared`, each pair's two runs have files of their own in two directories, their state in that
    /// server's schema.
    private func race(pairs: Int, leftover: [Leftover]?, shared: (url: String, schema: String)? = nil) throws
        -> [String]
    {
        let gates = Gates()
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        for method in ["GET", "PUT", "HEAD", "DELETE", "POST"] {
            server.route(try HTTPRoutePattern(parsing: "\(method) /{path...}")) { request in
                let bucket = String(request.path.dropFirst().prefix { $0 != "/" })
                gates.wait(bucket)
                return Self.answer(request)
            }
        }
        var files: [[String]] = []
        let machines = shared == nil ? [directory.path] : [directory.file("machine-a"), directory.file("machine-b")]
        for machine in machines {
            try FileManager.default.createDirectory(atPath: machine, withIntermediateDirectories: true)
        }
        let stateLine = shared.map { "state: { postgresql: \"${env:STATE_URL}\", schema: \($0.schema) }\n" } ?? ""
        var environment = ProcessInfo.processInfo.environment
        if let shared { environment["STATE_URL"] = shared.url }
        let runEnvironment = environment
        for pair in 0..<pairs {
            let name = "race\(pair)"
            let paths = machines.map { $0 + "/" + name + ".yaml" }
            let text = """
                version: 1
                name: \(name)
                \(stateLine)providers:
                  seed: { type: memory, items: { k: v } }
                  bucket:
                    type: s3
                    bucket: \(name)
                    endpoint: \(server.url("").absoluteString)
                    accessKeyId: test
                    secretAccessKey: test-secret
                store:
                  providers: [bucket]
                jobs:
                  - { type: migrate, from: seed, to: bucket }

                """
            for path in paths { try text.write(toFile: path, atomically: true, encoding: .utf8) }
            if let leftover {
                let state = directory.file(".cloudsync/\(name)")
                try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
                try leftover[pair % leftover.count].text.write(
                    toFile: state + "/run.lock", atomically: true, encoding: .utf8)
            }
            files.append(paths)
        }
        let pipelines = files
        let failures = Protected<[String]>([])
        let next = Protected(0)
        let workers = DispatchGroup()
        for _ in 0..<6 {
            workers.enter()
            Thread.detachNewThread {
                defer { workers.leave() }
                while true {
                    let pair = next.withLock { value -> Int in
                        defer { value += 1 }
                        return value
                    }
                    guard pair < pairs else { return }
                    if let failure = raceOnce(
                        pipelines[pair], bucket: "race\(pair)", gates: gates, environment: runEnvironment)
                    {
                        failures.withLock { $0.append("pair \(pair): \(failure)") }
                    }
                }
            }
        }
        workers.wait()
        return failures.withLock { $0 }
    }

    /// Starts two runs of `files` (one file twice, or each of two) at once; nil when exactly one proceeded and the
    /// other was refused as locked.
    private func raceOnce(_ files: [String], bucket: String, gates: Gates, environment: [String: String]) -> String? {
        let runs: [RunningProcess]
        do {
            runs = try (0..<2).map {
                try RunningProcess(
                    niced, ["-n", "10", executable, "run", files[$0 % files.count], "--quiet"], environment: environment
                )
            }
        } catch {
            return "could not start: \(error)"
        }
        let exited = DispatchSemaphore(value: 0)
        let results = Protected<[ProcessResult]>([])
        for run in runs {
            Thread.detachNewThread {
                let result = run.wait()
                results.withLock { $0.append(result) }
                exited.signal()
            }
        }
        // The first to end opens the pair's gate; if none ends in time, both are inside.
        let firstEnded = exited.wait(timeout: .now() + 20) == .success
        gates.open(bucket)
        exited.wait()
        if !firstEnded { exited.wait() }
        let ended = results.withLock { $0 }
        let statuses = ended.map(\.status).sorted()
        if firstEnded && statuses.filter({ $0 == 75 }).count == 1 { return nil }
        return "exit statuses \(statuses)\(firstEnded ? "" : " (both were inside at once)"): "
            + ended.map { $0.standardError.prefix(300) }.joined(separator: " | ")
    }

    private static func answer(_ request: ReceivedRequest) -> HTTPResponse {
        switch request.method {
        case "GET" where request.query("list-type") != nil:
            return .text(
                200,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><IsTruncated>false</IsTruncated>"
                    + "<KeyCount>0</KeyCount></ListBucketResult>", headers: ["Content-Type": "application/xml"])
        case "GET", "HEAD":
            return .text(
                404, "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>none</Message></Error>",
                headers: ["Content-Type": "application/xml"])
        case "DELETE":
            return .text(204)
        default:
            return .text(200, "", headers: ["ETag": "\"0\""])
        }
    }
}

/// One gate per pair: requests wait at it until the pair's first process has ended.
private final class Gates: @unchecked Sendable {
    private let condition = NSCondition()
    private var opened: Set<String> = []

    func wait(_ name: String) {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(60)
        while !opened.contains(name) {
            if !condition.wait(until: deadline) { return }
        }
    }

    func open(_ name: String) {
        condition.lock()
        opened.insert(name)
        condition.broadcast()
        condition.unlock()
    }
}
