import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// `migrate` and `move` that rename keys and reshape values on the way (`rename`, `filter`, `transform`), run as a
/// pipeline file through the runner: what lands where, what is left, what fails and what the report says of it.
@Suite struct ReshapingJobTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
    }

    private func run(_ jobs: String) async throws -> RunReport {
        let source = """
            version: 1
            name: reshape
            providers:
              src: { type: sqlite, path: data/src.db, create: true }
              dst: { type: directory, path: data/dst, create: true }
            store: { providers: [src] }
            jobs:
            \(jobs)
            report: { path: 'report-{startedAt}.json' }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: [:])
        return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions())
            .run()
            .report
    }

    private func provider(_ id: String) throws -> any Provider {
        id == "src"
            ? try SQLiteProvider(id: "src", path: directory.file("data/src.db"))
            : try DirectoryProvider(id: id, root: directory.file("data/\(id)"))
    }

    private func contents(_ id: String) async throws -> [String: String] {
        let provider = try provider(id)
        let keys = try await listEveryKey(of: provider, pageSize: 50)
        var items: [String: String] = [:]
        for (key, result) in zip(keys, try await provider.get(keys)) { items[key] = try result.get() }
        await provider.close()
        return items
    }

    private func put(_ items: [String: String], in id: String) async throws {
        let provider = try provider(id)
        for result in try await provider.set(items.sorted { $0.key < $1.key }.map { KeyValue($0.key, $0.value) }) {
            try result.get()
        }
        await provider.close()
    }

    static let settings = [
        "settings.theme": #"{"theme":"dark"}"#,
        "settings.font": #"{"theme":"light","retired":true}"#,
        "settings.token": "sk-live-4242 is not JSON",
        "other.layout": #"{"theme":"grid"}"#,
        "prefs.old": #"{"theme":"old"}"#,
    ]

    @Test func aMigrateRenamesFiltersAndReshapesAndFailsOnlyTheKeysItCannotWrite() async throws {
        try await put(Self.settings, in: "src")
        let report = try await run(
            """
              - name: reshape
                type: migrate
                from: src
                to: dst
                rename: { from: "settings.*", to: "prefs.{1}" }
                filter: '(.retired? // false) | not'
                transform: '{appearance: {theme: .theme}}'
            """)
        let job = try #require(report.jobs.first)
        #expect(job.counts["copied"] == 2)
        #expect(job.counts["skipped"] == 1)
        #expect(job.counts["failed"] == 2)
        #expect(
            try await contents("dst") == [
                "prefs.theme": #"{"appearance":{"theme":"dark"}}"#,
                "other.layout": #"{"appearance":{"theme":"grid"}}"#,
            ])
        let failures = Dictionary(uniqueKeysWithValues: job.failures.map { ($0.key, $0) })
        #expect(failures["settings.token"]?.code == "ERR_TRANSFORM")
        #expect(failures["prefs.old"]?.code == "ERR_CONFIG")
        #expect(failures["prefs.old"]?.message.contains("settings.old becomes prefs.old too") == true)
        // The value that is not JSON is named by key, never shown.
        #expect(!report.json().contains("sk-live-4242"), "\(report.json())")
        #expect(try await contents("src") == Self.settings)
    }

    @Test func aMoveRenamesAndReshapesThenRemovesWhatLandedAndARerunFindsNothingToDo() async throws {
        try await put(["settings.theme": #"{"theme":"dark"}"#, "settings.lang": #"{"theme":"en"}"#], in: "src")
        let jobs = """
              - name: move
                type: move
                from: src
                to: dst
                rename: { from: "settings.*", to: "prefs.{1}" }
                transform: '.theme'
            """
        let first = try #require(try await run(jobs).jobs.first)
        #expect(first.counts["moved"] == 2)
        #expect(try await contents("src").isEmpty)
        #expect(try await contents("dst") == ["prefs.theme": #""dark""#, "prefs.lang": #""en""#])
        let second = try #require(try await run(jobs).jobs.first)
        #expect(second.counts["moved"] == 0)
        #expect(second.status == .ok)
    }

    @Test func aMoveInterruptedAfterItsCopyFindsTheReshapedCopyUnchangedAndRemovesTheSource() async throws {
        // The copy landed (as a killed move leaves it) but the source was not removed yet.
        try await put(["settings.theme": #"{"theme":"dark"}"#], in: "src")
        try await put(["prefs.theme": #""dark""#], in: "dst")
        let job = try #require(
            try await run(
                """
                  - { name: move, type: move, from: src, to: dst, rename: { from: "settings.*", to: "prefs.{1}" }, transform: '.theme' }
                """
            ).jobs.first)
        #expect(job.counts["moved"] == 1)
        #expect(try await contents("src").isEmpty)
    }

    @Test func twoSpellingsOfOneNameAreTwoKeysThroughARenamedMove() async throws {
        // é precomposed and decomposed: equal as Swift strings, two keys by their bytes.
        let precomposed = "settings.caf\u{E9}"
        let decomposed = "settings.cafe\u{301}"
        try await put([precomposed: #"{"v":"one"}"#], in: "src")
        try await put([decomposed: #"{"v":"two"}"#], in: "src")
        let job = try #require(
            try await run(
                """
                  - { name: move, type: move, from: src, to: dst, rename: { from: "settings.*", to: "prefs.{1}" }, transform: '.v' }
                """
            ).jobs.first)
        #expect(job.counts["moved"] == 2, "\(job.failures)")
        let source = try provider("src")
        #expect(try await listEveryKey(of: source, pageSize: 10).isEmpty)
        await source.close()
        let destination = try provider("dst")
        let keys = try await listEveryKey(of: destination, pageSize: 10)
        #expect(Set(keys.map { StoreKey($0) }) == [StoreKey("prefs.caf\u{E9}"), StoreKey("prefs.cafe\u{301}")])
        let values = try await destination.get(["prefs.caf\u{E9}", "prefs.cafe\u{301}"]).map { try $0.get() }
        #expect(values == [#""one""#, #""two""#])
        await destination.close()
    }

    @Test func aTransformThatGivesNoValueOrSeveralFailsTheKey() async throws {
        try await put(["a": "[1,2]", "b": "[]", "c": "[3]"], in: "src")
        let job = try #require(
            try await run("  - { name: copy, type: migrate, from: src, to: dst, transform: '.[]' }").jobs.first)
        #expect(job.counts["copied"] == 1)
        #expect(Set(job.failures.map(\.key)) == ["a", "b"])
        #expect(job.failures.allSatisfy { $0.code == "ERR_TRANSFORM" })
        #expect(try await contents("dst") == ["c": "3"])
    }
}
