import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// A `migrate` that remembers what it copied, against what a migrate that re-sends every value would leave: after
/// every run the destination holds the source's value for every source key and keeps its own other keys, whatever
/// was edited on either side between runs.
@Suite struct RememberedMigrateTests {
    /// A SQLite source (its tag is its value's digest) and a destination, each edited directly between runs of one
    /// migrate job: SQLite too, or a directory, whose files written within the last moments list no tag (their times
    /// could still change unseen), so every run here reads them.
    struct Bench {
        let directory: TemporaryDirectory
        let overwrite: String
        /// Whether the destination encrypts what it stores, so its tags are those of sealed values.
        let sealed: Bool
        /// The destination's provider type: `sqlite` or `directory`.
        let destination: String

        init(overwrite: String, sealed: Bool, destination: String = "sqlite") throws {
            directory = try TemporaryDirectory()
            self.overwrite = overwrite
            self.sealed = sealed
            self.destination = destination
            let key = directory.file("vault.key")
            try (Data(repeating: 7, count: 32).base64EncodedString() + "\n").write(
                toFile: key, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        }

        var source: String {
            """
            version: 1
            name: remembered
            providers:
              a: { type: sqlite, path: a.db, create: true }
              b: { type: \(destination), path: b\(destination == "sqlite" ? ".db" : ""), create: true\(sealed ? ", codec: vault" : "") }
            codecs:
              vault: { type: xchacha20poly1305, keys: [{ id: k1, file: vault.key }] }
            store: { providers: [a, b] }
            jobs:
              - { type: migrate, name: copy, from: a, to: b, overwrite: \(overwrite) }
            """
        }

        func compiled() throws -> CompiledPipeline {
            let spec = try PipelineLoader.load(
                source: source, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
                environment: [:])
            return try PipelineCompiler.compile(spec, environment: [:])
        }

        func run(readUnchanged: Bool = false) async throws -> RunReport.Job {
            var options = RunOptions()
            options.readUnchanged = readUnchanged
            let outcome = try await PipelineRunner(try compiled(), options: options).run()
            return outcome.report.jobs[0]
        }

        /// Sets (a value) or removes (nil) keys on `a` or `b`, outside any run; `b` is written through its codec.
        func edit(_ id: String, _ changes: [String: String?]) async throws {
            let session = try await RunSession.open(try compiled())
            let sets = changes.compactMap { key, value in value.map { KeyValue(key, $0) } }
            let removes = changes.filter { $0.value == nil }.map(\.key)
            if !sets.isEmpty {
                for result in try await session.store.writeVersioned(sets, to: id) { _ = try result.get() }
            }
            if !removes.isEmpty { _ = try await session.providers[id]!.remove(removes) }
            await session.close()
        }

        /// What `id` holds, decoded.
        func contents(_ id: String) async throws -> [String: String] {
            let session = try await RunSession.open(try compiled())
            let keys = try await listEveryKey(of: session.providers[id]!, pageSize: 100)
            var items: [String: String] = [:]
            for (key, read) in zip(keys, try await session.store.readEach(keys, from: id)) {
                items[key] = try read.get()
            }
            await session.close()
            return items
        }
    }

    @Test(arguments: [
        ("always", false, "sqlite", 1 as UInt64), ("ifDifferent", false, "sqlite", 2), ("always", true, "sqlite", 3),
        ("ifDifferent", true, "sqlite", 4), ("always", false, "directory", 5), ("ifDifferent", true, "directory", 6),
    ])
    func randomEditsOnBothSidesEndAsAResendingMigrateWouldLeaveThem(
        overwrite: String, sealed: Bool, destination: String, seed: UInt64
    ) async throws {
        let bench = try Bench(overwrite: overwrite, sealed: sealed, destination: destination)
        var random = SeededRandom(seed: seed)
        let pool = (0..<30).map { "key\($0)" }
        var source: [String: String] = [:]
        var destination: [String: String] = [:]
        for round in 0..<12 {
            for _ in 0..<Int.random(in: 0...10, using: &random) {
                let side = Int.random(in: 0..<3, using: &random) == 0 ? "b" : "a"
                let key = pool.randomElement(using: &random)!
                let value: String? =
                    Int.random(in: 0..<4, using: &random) == 0 ? nil : "v\(Int.random(in: 0..<3, using: &random))"
                try await bench.edit(side, [key: value])
                if side == "a" { source[key] = value } else { destination[key] = value }
            }
            let job = try await bench.run()
            #expect(job.status == .ok, "seed \(seed) round \(round): \(job.error?.message ?? "")")
            // What re-sending every value would leave: the source's keys over the destination's own.
            destination.merge(source) { $1 }
            #expect(try await bench.contents("b") == destination, "seed \(seed) round \(round)")
            let copied = job.counts["copied"] ?? 0
            let unchanged = job.counts["unchanged"] ?? 0
            #expect(copied + unchanged == source.count, "seed \(seed) round \(round): \(job.counts)")
        }
        // Nothing new: nothing written.
        let quiet = try await bench.run()
        #expect(quiet.counts["copied"] == 0 && quiet.counts["unchanged"] == source.count, "\(quiet.counts)")
    }

    /// A job whose `keys` share a literal prefix lists only that stretch of each side: ten settings copied into a
    /// database of 6,000 other keys (before and after them in key order) cost each provider a listing page or two.
    @Test(arguments: ["migrate", "mirror"])
    func keysWithACommonPrefixBoundBothListings(type: String) async throws {
        let directory = try TemporaryDirectory()
        let source = try SQLiteProvider(id: "a", path: directory.file("a.db"))
        _ = try await source.set((0..<10).map { KeyValue("settings.\($0)", "v\($0)") })
        await source.close()
        let destination = try SQLiteProvider(id: "b", path: directory.file("b.db"))
        _ = try await destination.set(
            (0..<3_000).flatMap { [KeyValue("alpha.\($0)", "x"), KeyValue("zulu.\($0)", "x")] })
        await destination.close()
        let spec = try PipelineLoader.load(
            source: """
                version: 1
                name: bounded
                providers:
                  a: { type: sqlite, path: a.db }
                  b: { type: sqlite, path: b.db }
                store: { providers: [a] }
                jobs:
                  - { type: \(type), name: copy, from: a, to: b, keys: ["settings.*"] }
                """, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry, environment: [:])
        let outcome = try await PipelineRunner(
            try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions()
        ).run()
        #expect(outcome.report.jobs[0].counts["copied"] == 10, "\(outcome.report.jobs[0].counts)")
        let requests = Dictionary(uniqueKeysWithValues: outcome.report.providers.map { ($0.id, $0.requests) })
        // The destination: its availability, a listing page of the settings, one write; not six pages of others.
        #expect((requests["b"] ?? 99) <= 3, "\(requests)")
        let held = try SQLiteProvider(id: "b", path: directory.file("b.db"))
        #expect(try await held.get(["settings.3", "alpha.7", "zulu.9"]).map { try $0.get() } == ["v3", "x", "x"])
        await held.close()
    }

    /// Told to read every copy (after a codec's key was replaced, say), the run trusts no recorded tag.
    @Test func readUnchangedComparesEveryKeyAgain() async throws {
        let bench = try Bench(overwrite: "always", sealed: true)
        try await bench.edit("a", ["one": "1", "two": "2"])
        #expect(try await bench.run().counts["copied"] == 2)
        #expect(try await bench.run().counts["unchanged"] == 2)
        // The destination rewritten with the same value, sealed anew: its tag moved, so a read there spares the write.
        try await bench.edit("b", ["one": "1"])
        let reread = try await bench.run()
        #expect(reread.counts["copied"] == 0 && reread.counts["unchanged"] == 2, "\(reread.counts)")
        // An edit behind the job's back at the destination is undone.
        try await bench.edit("b", ["two": "edited at b"])
        let undone = try await bench.run()
        #expect(undone.counts["copied"] == 1 && undone.counts["unchanged"] == 1, "\(undone.counts)")
        #expect(try await bench.contents("b") == ["one": "1", "two": "2"])
        let forced = try await bench.run(readUnchanged: true)
        #expect(forced.counts["copied"] == 2, "`always` without a row to trust writes: \(forced.counts)")
    }
}
