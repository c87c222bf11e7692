import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// The issue's observations of canonically equivalent keys merging in the runner: each job keeps five spellings
/// five keys, from a SQLite provider to a directory, an export file and back.
@Suite struct KeyTwinPipelineTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory() }

    private func run(_ jobs: String, extraProviders: String = "") async throws -> RunReport {
        let source = """
            version: 1
            name: twins
            providers:
              lite: { type: sqlite, path: data/lite.db, create: true }
              dir: { type: directory, path: data/dir }
              fresh: { type: sqlite, path: data/fresh.db, create: true }
            \(extraProviders)
            store: { providers: [lite, dir] }
            jobs:
            \(jobs)
            report: { path: report.json }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
            environment: [:])
        return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions())
            .run().report
    }

    private func contents(of provider: any Provider) async throws -> [StoreKey: String] {
        let keys = try await listEveryKey(of: provider, pageSize: 2)
        var items: [StoreKey: String] = [:]
        for (key, result) in zip(keys, try await provider.get(keys)) { items[StoreKey(key)] = try result.get() }
        await provider.close()
        return items
    }

    private var lite: SQLiteProvider {
        get throws { try SQLiteProvider(id: "lite", path: directory.file("data/lite.db")) }
    }

    private func seed() async throws {
        let provider = try lite
        _ = try await provider.set(KeyTwins.canonical.map { KeyValue($0, KeyTwins.value(for: $0)) })
        await provider.close()
    }

    private var everyTwin: [StoreKey: String] {
        Dictionary(uniqueKeysWithValues: KeyTwins.canonical.map { (StoreKey($0), KeyTwins.value(for: $0)) })
    }

    @Test func aSyncCopiesTheTwinsADirectoryLacks() async throws {
        try await seed()
        try FileManager.default.createDirectory(atPath: directory.file("data/dir"), withIntermediateDirectories: true)
        let dir = try DirectoryProvider(id: "dir", root: directory.file("data/dir"))
        let precomposed = ["caf\u{E9}", "\u{C5}"]
        _ = try await dir.set(precomposed.map { KeyValue($0, KeyTwins.value(for: $0)) })
        let first = try await run("  - { type: sync, name: nightly }").jobs[0]
        #expect(first.status == .ok)
        #expect(first.counts["keys"] == 5)
        #expect(first.counts["repaired"] == 3)
        #expect(first.counts["inSync"] == 2)
        #expect(try await contents(of: DirectoryProvider(id: "dir", root: directory.file("data/dir"))) == everyTwin)
        let second = try await run("  - { type: sync, name: nightly }").jobs[0]
        #expect(second.counts["inSync"] == 5 && second.counts["repaired"] == 0)
    }

    @Test func anExportAndAnImportKeepEveryTwin() async throws {
        try await seed()
        let exported = try await run("  - { type: export, from: lite, path: out/twins.json }").jobs[0]
        #expect(exported.status == .ok)
        #expect(exported.counts["items"] == 5)
        let imported = try await run("  - { type: import, path: out/twins.json, to: fresh }").jobs[0]
        #expect(imported.status == .ok)
        #expect(imported.counts["imported"] == 5)
        #expect(try await contents(of: SQLiteProvider(id: "fresh", path: directory.file("data/fresh.db"))) == everyTwin)
    }

    @Test func aMigrateCopiesEveryTwin() async throws {
        try await seed()
        let job = try await run("  - { type: migrate, from: lite, to: fresh }").jobs[0]
        #expect(job.status == .ok, "\(job)")
        #expect(job.counts["copied"] == 5)
        #expect(try await contents(of: SQLiteProvider(id: "fresh", path: directory.file("data/fresh.db"))) == everyTwin)
    }

    /// YAML tells the spellings apart as it tells any two keys apart: they are not duplicates.
    @Test func aMemoryProvidersItemsMayHoldEveryTwin() async throws {
        let report = try await run(
            "  - { type: export, from: mem, path: out/mem.json }",
            extraProviders:
                #"  mem: { type: memory, items: { "caf\u00E9": "1", "cafe\u0301": "2", "\u00C5": "3", "A\u030A": "4", "\u212B": "5" } }"#
        )
        #expect(report.jobs[0].status == .ok)
        #expect(report.jobs[0].counts["items"] == 5)
    }
}
