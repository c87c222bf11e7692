import CloudSync
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync run` killed (SIGKILL) at random moments never damages what it writes.
///
/// Each run migrates to a SQLite database, a directory, an encrypted directory and an S3 bucket (moto); after every
/// kill each database passes `PRAGMA integrity_check`, the next run converges (leaving no temporary file behind),
/// and every key of every destination equals its source. Seeded: the kill moments repeat from run to run.
@Suite(.enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full")) struct CrashLoopStressTests {
    let executable: String
    let directory: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() async throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("keys"), withIntermediateDirectories: true)
        _ = try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/vault.key")])
    }

    static let destinations = ["db", "files", "sealed", "bucket"]
    static let keys = 12
    /// Runs killed at a random moment: 100 under `CLOUDSYNC_STRESS=full`.
    static let rounds = StressSize.pick(ci: 40, full: 100)

    /// The source's values in generation `generation`: each run that follows a kill writes new ones.
    static func items(_ generation: Int) -> [String: String] {
        var items: [String: String] = [:]
        for index in 0..<keys {
            items[String(format: "k%02d", index)] =
                "g\(generation)-\(index)-" + String(repeating: "x", count: (index * 37 + generation) % 400)
        }
        return items
    }

    private func writePipeline(generation: Int) throws -> String {
        let path = directory.file("crash.yaml")
        let items = Self.items(generation).sorted { $0.key < $1.key }.map { "      \($0.key): \($0.value)\n" }.joined()
        let migrations = Self.destinations.map { "  - { type: migrate, name: to-\($0), from: seed, to: \($0) }\n" }
        let exports = Self.destinations.map {
            "  - { type: export, name: out-\($0), from: \($0), path: out/\($0).json }\n"
        }
        try """
        version: 1
        name: crash
        providers:
          seed:
            type: memory
            items:
        \(items)  db: { type: sqlite, path: data/crash.db, create: true }
          files: { type: directory, path: data/files, create: true }
          sealed: { type: directory, path: data/sealed, codec: vault, create: true }
          bucket: { type: s3, bucket: crash, endpoint: "${env:CLOUDSYNC_S3_ENDPOINT}" }
        codecs:
          vault:
            type: xchacha20poly1305
            keys: [{ id: k1, file: keys/vault.key }]
        store:
          providers: [db, files, sealed, bucket]
        jobs:
        \((migrations + exports).joined())
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func killedRunsNeverCorruptAndTheNextRunConverges() async throws {
        let (problems, killedMidway) = try await offPool { try crashLoop() }
        #expect(problems.isEmpty, "\(problems.count) problems: \(problems.prefix(10))")
        // The moments were spread over the runs: most kills landed while a run was still going.
        #expect(
            killedMidway > Self.rounds / 2, "only \(killedMidway) of \(Self.rounds) runs were still going when killed")
    }

    /// The rounds: what went wrong, and how many runs were still going when killed.
    private func crashLoop() throws -> ([String], Int) {
        let moto = try MotoS3Server(repository: root, buckets: ["crash"], niceness: 10)
        var environment = ProcessInfo.processInfo.environment
        environment["CLOUDSYNC_S3_ENDPOINT"] = "http://127.0.0.1:\(moto.port)"
        environment["AWS_ACCESS_KEY_ID"] = "moto"
        environment["AWS_SECRET_ACCESS_KEY"] = "moto"
        var random = SeededRandom(seed: 0x5EED_C0DE)
        var problems: [String] = []
        var killedMidway = 0
        var leftBefore = Set<String>()
        for round in 0..<Self.rounds {
            let file = try writePipeline(generation: round)
            let killed = try RunningProcess(
                niced, ["-n", "10", executable, "run", file, "--quiet"], environment: environment)
            usleep(UInt32(random.next(upperBound: UInt64(200_000))))
            killed.signal(SIGKILL)
            if killed.wait().status == SIGKILL { killedMidway += 1 }
            for database in ["data/crash.db", ".cloudsync/crash/state.db", ".cloudsync/crash/outbox.db"] {
                if let damage = integrityProblem(directory.file(database)) {
                    problems.append("round \(round): \(database): \(damage)")
                }
            }
            let rerun = try ProcessRunner.runBlocking(
                niced, ["-n", "10", executable, "run", file, "--quiet"], environment: environment)
            guard rerun.status == 0 else {
                problems.append("round \(round): the rerun exited \(rerun.status): \(rerun.standardError.prefix(400))")
                continue
            }
            let expected = Self.items(round)
            for destination in Self.destinations {
                let exported = itemsExported(directory.file("out/\(destination).json"))
                if exported != expected {
                    let wrong = expected.keys.filter { exported?[$0] != expected[$0] }.sorted()
                    problems.append("round \(round): \(destination) differs from the source at \(wrong.prefix(5))")
                }
            }
            // A run removes what killed writes left before it started: none outlives a second rerun.
            let temporary = Set(
                ["data/files", "data/sealed"].flatMap { folder in
                    ((try? FileManager.default.subpathsOfDirectory(atPath: directory.file(folder))) ?? []).filter {
                        ($0 as NSString).lastPathComponent.hasPrefix(".tmp-")
                    }.map { folder + "/" + $0 }
                })
            if !temporary.intersection(leftBefore).isEmpty {
                problems.append("round \(round): \(temporary.intersection(leftBefore).sorted()) outlived two runs")
            }
            leftBefore = temporary
            if problems.count > 10 { break }
        }
        return (problems, killedMidway)
    }

    private func integrityProblem(_ path: String) -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let database = try SQLiteDatabase(path: path, options: .init(readOnly: true))
            defer { database.close() }
            let answer = try database.read { try $0.query("PRAGMA integrity_check") { $0.string(0) ?? "" } }
            return answer == ["ok"] ? nil : "\(answer.prefix(3))"
        } catch {
            return "\(error)"
        }
    }

    private func itemsExported(_ path: String) -> [String: String]? { exportedItems(at: path) }
}
