import CloudSync
import CloudSyncJobs
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// Numbered migrations (`migrations:`): applied once each, in order, before the jobs; the same file gives the same
/// key set on every environment; an applied migration edited since is refused naming both checksums; and a run that
/// stopped partway resumes its step's plan rather than rewriting a value twice.
@Suite struct MigrationsCommandTests {
    let root: TemporaryDirectory

    init() throws { root = try TemporaryDirectory() }

    /// The pipeline of one environment: settings copied from SQLite into a directory, renamed, then reshaped.
    ///
    /// Paths are relative, so every environment's file is the same text.
    static func pipeline(
        transform: String = "{appearance: {theme: .theme}}", backedUp: Bool = false,
        app: String = "{ type: directory, path: ./app, create: true }"
    ) -> String {
        let before = backedUp ? "\n    before: { backup: { to: vault, codec: sealed } }" : ""
        return """
            version: 1
            name: prefs
            providers:
              old: { type: sqlite, path: ./old.db, create: true }
              app: \(app)
              vault: { type: directory, path: ./vault, create: true }
            codecs:
              sealed: { type: xchacha20poly1305, keys: [{ id: k1, file: ./backup.key }] }
            store: { providers: [app] }
            migrations:
              - id: 001-copy-settings
                description: settings come over from the old database
                on: app\(before)
                steps:
                  - migrate: { from: old, to: app, keys: "settings.*" }
              - id: 002-prefs-namespace
                description: settings.* become prefs.*
                on: app\(before)
                steps:
                  - rename: { from: "settings.*", to: "prefs.{1}" }
                  - transform: { keys: "prefs.*", jq: '. + {renamed: true}' }
              - id: 003-appearance
                on: app\(before)
                steps:
                  - transform: { keys: "prefs.*", jq: '\(transform)' }
            jobs:
              - { name: check-app, type: verify, provider: app }
            """
    }

    /// A new environment named `name`: the pipeline file and an old database holding `items`.
    private func environment(
        _ name: String, items: [String: String], backedUp: Bool = false, pipeline: String = Self.pipeline()
    ) async throws -> String {
        let directory = root.file(name)
        try FileManager.default.createDirectory(atPath: directory + "/app", withIntermediateDirectories: true)
        try write(backedUp ? Self.pipeline(backedUp: true) : pipeline, in: directory)
        #expect(await cloudsync(["keygen", "--out", directory + "/backup.key"]).status == .success)
        let old = try SQLiteProvider(id: "old", path: directory + "/old.db")
        for result in try await old.set(items.map { KeyValue($0.key, $0.value) }) { try result.get() }
        await old.close()
        return directory
    }

    private func write(_ pipeline: String, in directory: String) throws {
        try pipeline.write(toFile: directory + "/p.yaml", atomically: true, encoding: .utf8)
    }

    private func cloudsync(_ arguments: [String], environment: [String: String] = [:]) async -> (
        status: ExitCode, output: String, errors: String
    ) {
        await inProcessCloudsync(arguments, environment: environment)
    }

    /// A run's report, from `--report -`.
    private func run(_ directory: String, _ extra: [String] = [], environment: [String: String] = [:]) async throws
        -> (ExitCode, [[String: Any]])
    {
        let ran = await cloudsync(["run", directory + "/p.yaml", "--report", "-"] + extra, environment: environment)
        let report = try JSONSerialization.jsonObject(with: Data(ran.output.utf8)) as? [String: Any]
        return (ran.status, try #require(report?["jobs"] as? [[String: Any]], "\(ran.errors)"))
    }

    /// Every file of `app` by name, as bytes.
    private func files(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory + "/app") {
            files[name] = FileManager.default.contents(atPath: directory + "/app/" + name)
        }
        return files
    }

    static let items = [
        "settings.theme": #"{"theme":"dark"}"#, "settings.compact": #"{"theme":"light","size":2}"#,
        "settings.empty": "{}", "other.kept": #"{"theme":"old"}"#,
    ]

    @Test func threeMigrationsGiveByteIdenticalKeySetsOnTwoEnvironmentsAndApplyOnce() async throws {
        let first = try await environment("staging", items: Self.items)
        let second = try await environment("production", items: Self.items)
        // The plan shows each migration's steps and checksum before anything runs.
        let plan = await cloudsync(["plan", first + "/p.yaml"])
        let checksum = try #require(try loadPipeline(first + "/p.yaml").migrations.last?.checksum)
        #expect(plan.output.contains("  3. 003-appearance on app (checksum \(checksum.prefix(12)))"), "\(plan.output)")
        #expect(plan.output.contains("     step 1: rename keys of app: settings.* -> prefs.{1}, never replacing"))
        for directory in [first, second] {
            let (status, jobs) = try await run(directory)
            #expect(status == .success)
            #expect(
                jobs.map { $0["name"] as? String } == [
                    "001-copy-settings step 1", "002-prefs-namespace step 1", "002-prefs-namespace step 2",
                    "003-appearance step 1", "check-app",
                ])
        }
        let applied = try files(first)
        #expect(try files(second) == applied)
        #expect(
            applied.mapValues { String(decoding: $0, as: UTF8.self) } == [
                "prefs.theme": #"{"appearance":{"theme":"dark"}}"#,
                "prefs.compact": #"{"appearance":{"theme":"light"}}"#, "prefs.empty": #"{"appearance":{"theme":null}}"#,
            ])
        // Applied once: a second run applies nothing and changes nothing.
        let (status, jobs) = try await run(first)
        #expect(status == .success)
        #expect(jobs.map { $0["name"] as? String } == ["check-app"])
        #expect(try files(first) == applied)
        let info = await cloudsync(["migrations", "info", first + "/p.yaml", "--json"])
        #expect(info.status == .success)
        let lines = try #require(try JSONSerialization.jsonObject(with: Data(info.output.utf8)) as? [[String: Any]])
        #expect(lines.map { $0["standing"] as? String } == ["applied", "applied", "applied"])
    }

    @Test func threeMigrationsFromSQLiteIntoS3GiveByteIdenticalBucketsOnTwoEnvironments() async throws {
        let moto = try await MotoS3Server.start(repository: Self.repositoryRoot, buckets: ["staging", "production"])
        let s3 =
            "{ type: s3, bucket: \"${env:BUCKET}\", endpoint: \"${env:ENDPOINT}\", region: us-east-1, prefix: prefs/ }"
        var copies: [[String: Data]] = []
        for bucket in ["staging", "production"] {
            let environment = [
                "BUCKET": bucket, "ENDPOINT": moto.endpoint.absoluteString, "AWS_ACCESS_KEY_ID": "moto",
                "AWS_SECRET_ACCESS_KEY": "moto",
            ]
            let directory = try await self.environment(bucket, items: Self.items, pipeline: Self.pipeline(app: s3))
            let (status, jobs) = try await run(directory, environment: environment)
            #expect(status == .success, "\(jobs)")
            #expect(jobs.count == 5)
            #expect(try await run(directory, environment: environment).1.count == 1, "applied once")
            // The bucket's objects, copied out as they are stored.
            try """
            version: 1
            name: reader
            providers:
              app: \(s3)
              copy: { type: directory, path: ./copy, create: true }
            store: { providers: [copy] }
            jobs:
              - { type: migrate, from: app, to: copy }
            """.write(toFile: directory + "/reader.yaml", atomically: true, encoding: .utf8)
            let read = await cloudsync(["run", directory + "/reader.yaml"], environment: environment)
            #expect(read.status == .success, "\(read.errors)")
            var copy: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: directory + "/copy") {
                copy[name] = FileManager.default.contents(atPath: directory + "/copy/" + name)
            }
            copies.append(copy)
        }
        await moto.stopped()
        #expect(copies[0] == copies[1])
        #expect(
            copies[0].mapValues { String(decoding: $0, as: UTF8.self) } == [
                "prefs.theme": #"{"appearance":{"theme":"dark"}}"#,
                "prefs.compact": #"{"appearance":{"theme":"light"}}"#, "prefs.empty": #"{"appearance":{"theme":null}}"#,
            ])
    }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func anAppliedMigrationEditedSinceIsRefusedWithBothChecksumsUntilRepaired() async throws {
        let directory = try await environment("edited", items: Self.items)
        #expect(try await run(directory).0 == .success)
        let applied = try files(directory)
        let recorded = try #require(
            try loadPipeline(directory + "/p.yaml").migrations.last?.checksum)
        try write(Self.pipeline(transform: "{appearance: {theme: .theme, v: 2}}"), in: directory)
        let edited = try #require(try loadPipeline(directory + "/p.yaml").migrations.last?.checksum)
        #expect(edited != recorded)
        let (status, jobs) = try await run(directory)
        #expect(status != .success)
        let message = try #require((jobs.first?["error"] as? [String: Any])?["message"] as? String)
        #expect(message.contains(recorded) && message.contains(edited) && message.contains("003-appearance"))
        #expect(jobs.count == 2 && jobs[1]["status"] as? String == "skipped", "no job runs on a refused file")
        #expect(try files(directory) == applied)
        let info = await cloudsync(["migrations", "info", directory + "/p.yaml"])
        #expect(info.status == .failure)
        #expect(info.output.contains("edited since: recorded checksum \(recorded), the file gives \(edited)"))
        // Reviewed: the new checksum is recorded, and nothing is applied again.
        let repaired = await cloudsync(["migrations", "repair", directory + "/p.yaml", "003-appearance"])
        #expect(repaired.status == .success, "\(repaired.errors)")
        let (after, afterJobs) = try await run(directory)
        #expect(after == .success)
        #expect(afterJobs.map { $0["name"] as? String } == ["check-app"])
        #expect(try files(directory) == applied)
    }

    @Test func aRunStoppedAfterATransformWroteResumesItsPlanAndRewritesNothingTwice() async throws {
        let directory = try await environment("resumed", items: Self.items)
        #expect(try await run(directory).0 == .success)
        let applied = try files(directory)
        // As if the run had died after step 1 of 003 wrote every key but before the state recorded it applied.
        try stopInsideTheLastStep(directory)
        let (status, jobs) = try await run(directory)
        #expect(status == .success)
        let step = try #require(jobs.first)
        #expect(step["name"] as? String == "003-appearance step 1")
        #expect((step["counts"] as? [String: Int])?["copied"] == 0)
        #expect((step["counts"] as? [String: Int])?["unchanged"] == 3)
        #expect(try files(directory) == applied, "a second transform would turn every theme into null")
    }

    @Test func aStepStuckOnAKeyChangedSinceItsPlanGoesOnOnlyOnceRepairAcceptsIt() async throws {
        let directory = try await environment("stuck", items: Self.items)
        #expect(try await run(directory).0 == .success)
        // As if the run had died inside 003's step, and someone then wrote one of its keys by hand.
        try stopInsideTheLastStep(directory)
        try #"{"theme":"by hand"}"#.write(toFile: directory + "/app/prefs.theme", atomically: true, encoding: .utf8)
        // Each run resumes the plan, and each leaves that key alone and names it.
        for _ in 1...2 {
            let (status, jobs) = try await run(directory)
            #expect(status == .failure)
            let failures = try #require(jobs.first?["failures"] as? [[String: Any]])
            #expect(failures.map { $0["key"] as? String } == ["prefs.theme"])
            #expect(failures.first?["code"] as? String == "ERR_CHANGED_SINCE_READ")
        }
        let repaired = await cloudsync(["migrations", "repair", directory + "/p.yaml", "003-appearance"])
        #expect(repaired.status == .success, "\(repaired.errors)")
        #expect(repaired.output.contains("recorded step 1 applied"))
        let (status, jobs) = try await run(directory)
        #expect(status == .success)
        #expect(jobs.map { $0["name"] as? String } == ["check-app"])
        #expect(
            String(decoding: try files(directory)["prefs.theme"] ?? Data(), as: UTF8.self) == #"{"theme":"by hand"}"#)
    }

    @Test func aStepWhosePlanFindsAFailingKeyWritesNothingAndTheJobsWait() async throws {
        var items = Self.items
        items["settings.broken"] = "not json"
        let directory = try await environment("broken", items: items)
        let (status, jobs) = try await run(directory)
        #expect(status == .failure)
        let names = jobs.map { $0["name"] as? String }
        #expect(
            names == [
                "001-copy-settings step 1", "002-prefs-namespace step 1", "002-prefs-namespace step 2", "check-app",
            ])
        #expect(jobs[2]["status"] as? String == "failed")
        #expect(jobs[3]["status"] as? String == "skipped")
        let failures = try #require(jobs[2]["failures"] as? [[String: Any]])
        #expect(failures.map { $0["key"] as? String } == ["prefs.broken"])
        #expect(failures.first?["code"] as? String == "ERR_TRANSFORM")
        // Nothing of the step was written: every value is as the rename left it.
        #expect(String(decoding: try files(directory)["prefs.theme"] ?? Data(), as: UTF8.self) == #"{"theme":"dark"}"#)
        let info = await cloudsync(["migrations", "info", directory + "/p.yaml"])
        #expect(info.status == .failure)
        #expect(info.output.contains("002-prefs-namespace  failed"))
        // Fixed at the source of the trouble, the next run plans the step again and applies it.
        try "{\"theme\":\"mended\"}".write(toFile: directory + "/app/prefs.broken", atomically: true, encoding: .utf8)
        let (fixed, _) = try await run(directory)
        #expect(fixed == .success)
        #expect(
            String(decoding: try files(directory)["prefs.broken"] ?? Data(), as: UTF8.self)
                == #"{"appearance":{"theme":"mended"}}"#)
    }

    @Test func aStoppedMigrationTakesEditsToTheStepsItDidNotReachButNotToThoseItApplied() async throws {
        var items = Self.items
        items["settings.broken"] = #""a string, not an object""#
        let directory = try await environment("amended", items: items)
        // 002 stops at its second step, whose plan found a value its program cannot take: nothing of it was written.
        #expect(try await run(directory).0 == .failure)
        let pipeline = Self.pipeline()
        // Its applied first step edited: refused, naming both checksums.
        try write(pipeline.replacingOccurrences(of: #"to: "prefs.{1}""#, with: #"to: "p.{1}""#), in: directory)
        let (refused, refusedJobs) = try await run(directory)
        #expect(refused == .jobError)
        let message = try #require((refusedJobs.first?["error"] as? [String: Any])?["message"] as? String)
        #expect(message.contains("migration 002-prefs-namespace stopped partway with checksum"))
        // Its second step, which it did not reach, mended: the run finishes it.
        try write(
            pipeline.replacingOccurrences(
                of: "jq: '. + {renamed: true}'", with: "jq: 'try (. + {renamed: true}) catch {unreadable: true}'"),
            in: directory)
        let (status, jobs) = try await run(directory)
        #expect(status == .success, "\(jobs)")
        #expect(
            jobs.map { $0["name"] as? String } == [
                "002-prefs-namespace step 2", "003-appearance step 1", "check-app",
            ])
        #expect(
            String(decoding: try files(directory)["prefs.broken"] ?? Data(), as: UTF8.self)
                == #"{"appearance":{"theme":null}}"#)
        let info = await cloudsync(["migrations", "info", directory + "/p.yaml"])
        #expect(info.status == .success, "\(info.output)")
    }

    @Test func aRenameOntoANameHoldingAnotherValueIsRefusedAndLeavesBothKeys() async throws {
        let directory = try await environment("clash", items: Self.items)
        try #"{"theme":"someone else's"}"#.write(
            toFile: directory + "/app/prefs.theme", atomically: true, encoding: .utf8)
        let (status, jobs) = try await run(directory)
        #expect(status == .failure)
        #expect(jobs[1]["name"] as? String == "002-prefs-namespace step 1")
        let failures = try #require(jobs[1]["failures"] as? [[String: Any]])
        #expect(failures.map { $0["key"] as? String } == ["settings.theme"])
        #expect((failures.first?["message"] as? String)?.contains("prefs.theme already holds another value") == true)
        let files = try files(directory)
        #expect(String(decoding: files["prefs.theme"] ?? Data(), as: UTF8.self) == #"{"theme":"someone else's"}"#)
        #expect(files["settings.theme"] != nil && files["prefs.compact"] == nil, "nothing of the step was written")
    }

    @Test func undoRestoresWhatTheLastMigrationsReplacedAndRemovesWhatTheyMade() async throws {
        var items = Self.items
        items["settings.broken"] = "not json"
        let directory = try await environment("undone", items: items, backedUp: true)
        // 002 stops at its second step: the rename is applied, the transform is not.
        #expect(try await run(directory).0 == .failure)
        let renamed = try files(directory)
        try "{\"theme\":\"mended\"}".write(toFile: directory + "/app/prefs.broken", atomically: true, encoding: .utf8)
        let mended = try files(directory)
        let (status, jobs) = try await run(directory)
        #expect(status == .success)
        #expect(
            jobs.map { $0["name"] as? String } == [
                "002-prefs-namespace step 2", "003-appearance backup", "003-appearance step 1", "check-app",
            ])
        // A key written since, by someone else: no undo touches it.
        try "theirs".write(toFile: directory + "/app/outsider", atomically: true, encoding: .utf8)
        // Undo refuses to skip over 003, then takes the migrations back one at a time.
        let early = await cloudsync(["migrations", "undo", directory + "/p.yaml", "002-prefs-namespace"])
        #expect(early.status == .jobError)
        #expect(early.errors.contains("003-appearance, after 002-prefs-namespace, is applied"))
        #expect(await cloudsync(["migrations", "undo", directory + "/p.yaml", "003-appearance"]).status == .success)
        let afterThree = try files(directory)
        #expect(afterThree.keys.sorted() == (mended.keys + ["outsider"]).sorted())
        #expect(
            String(decoding: afterThree["prefs.theme"] ?? Data(), as: UTF8.self) == #"{"theme":"dark","renamed":true}"#)
        #expect(
            await cloudsync(["migrations", "undo", directory + "/p.yaml", "002-prefs-namespace"]).status == .success)
        // Back to what 001 left: the settings keys with the old database's values, and no prefs key.
        #expect(renamed.keys.allSatisfy { $0.hasPrefix("prefs.") })
        #expect(
            try files(directory).mapValues { String(decoding: $0, as: UTF8.self) }
                == items.filter { $0.key.hasPrefix("settings.") }.merging(["outsider": "theirs"]) { $1 })
        let info = await cloudsync(["migrations", "info", directory + "/p.yaml", "--json"])
        let lines = try #require(try JSONSerialization.jsonObject(with: Data(info.output.utf8)) as? [[String: Any]])
        #expect(lines.map { $0["standing"] as? String } == ["applied", "pending", "pending"])
        // A migration without a backup has nothing to restore from.
        let none = try await environment("unbacked", items: Self.items)
        #expect(try await run(none).0 == .success)
        let refused = await cloudsync(["migrations", "undo", none + "/p.yaml", "003-appearance"])
        #expect(refused.status == .jobError)
        #expect(refused.errors.contains("applied without a backup"))
    }

    @Test func aDryRunListsPendingStepsAndChangesNothing() async throws {
        let directory = try await environment("rehearsed", items: Self.items)
        let (status, jobs) = try await run(directory, ["--dry-run"])
        #expect(status == .success)
        #expect(jobs.prefix(3).allSatisfy { $0["status"] as? String == "skipped" })
        #expect(try files(directory).isEmpty)
    }

    /// Sets the state's record of 003 back to what a run that died while applying its one step leaves: that step
    /// planned, none applied.
    private func stopInsideTheLastStep(_ directory: String) throws {
        let compiled = try PipelineCompiler.compile(try loadPipeline(directory + "/p.yaml"), environment: [:])
        let state = try StateDatabase(path: directory + "/.cloudsync/prefs/state.db", codec: compiled.stateCodec)
        defer { state.close() }
        var record = try #require(try MigrationRecord.load("003-appearance", from: state))
        record.status = .failed
        record.stepsApplied = 0
        record.plannedStep = 1
        record.appliedAt = nil
        try record.save("003-appearance", to: state)
    }

    private func loadPipeline(_ path: String) throws -> PipelineSpec {
        try PipelineLoader.load(
            path: path, registry: BuiltInProviders.registry, jobTypes: BuiltInJobs.registry, environment: [:])
    }
}
