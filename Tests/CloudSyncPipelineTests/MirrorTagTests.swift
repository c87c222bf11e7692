import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// What a mirror reads on the run after one that wrote: a destination whose tags are its values' digests is not read
/// again for the keys the job wrote there, and an edit made there behind the job's back is still undone.
@Suite struct MirrorTagTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory() }

    private func run(destinationUnreadable: Bool = false) async throws -> RunReport.Job {
        var registry = BuiltInProviders.registry
        registry.register(SwitchableProviderFactory())
        let source = """
            version: 1
            name: mirroring
            providers:
              src: { type: switchable, path: data/src.db }
              dst: { type: switchable, path: data/dst.db, unreadable: \(destinationUnreadable) }
            store: { providers: [src] }
            jobs:
              - { name: backup, type: mirror, from: src, to: dst }
            report: { path: report.json }
            """
        let spec = try PipelineLoader.load(
            source: source, file: "p.yaml", directory: directory.path, registry: registry, environment: [:])
        let outcome = try await PipelineRunner(
            try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions()
        ).run()
        return outcome.report.jobs[0]
    }

    private func put(_ items: [String: String], in id: String) async throws {
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        let provider = try SQLiteProvider(id: id, path: directory.file("data/\(id).db"))
        _ = try await provider.set(items.map { KeyValue($0.key, $0.value) })
        await provider.close()
    }

    @Test func keysWrittenToADestinationWhoseTagsAreDigestsAreNotReadThereNextRun() async throws {
        try await put(Dictionary(uniqueKeysWithValues: (0..<30).map { ("k\($0)", "value \($0)") }), in: "src")
        #expect(try await run().counts["copied"] == 30)
        // Nothing changed: the destination is not read (here every read of it would fail).
        let spared = try await run(destinationUnreadable: true)
        #expect(spared.status == .ok && spared.counts["unchanged"] == 30 && spared.counts["failed"] == 0)
        // Edited behind the job's back, a key's tag moves: it is read, and the edit undone.
        try await put(["k7": "edited in the backup"], in: "dst")
        let undone = try await run()
        #expect(undone.counts["updated"] == 1 && undone.counts["unchanged"] == 29)
        #expect(try await run(destinationUnreadable: true).counts["unchanged"] == 30)
    }

    /// A codec between the store and the provider stores something else than the value, so the provider's tag is
    /// not the value's digest; a provider whose tags are not digests never knows a written value's tag.
    @Test func aWrittenValuesTagIsKnownOnlyWithoutACodecAndWithDigestTags() throws {
        struct Reversing: ValueCodec {
            func encode(_ value: String, key: String) throws -> String { String(value.reversed()) }
            func decode(_ stored: String, key: String) throws -> String { String(stored.reversed()) }
        }
        let plain = try SQLiteProvider(id: "plain", path: directory.file("plain.db"))
        let sealed = try SQLiteProvider(id: "sealed", path: directory.file("sealed.db"))
        var options = StoreOptions()
        options.providerCodecs = ["sealed": Reversing()]
        let store = try CloudStore(providers: [plain, sealed, MemoryProvider(id: "memory")], options: options)
        #expect(try store.listsWrittenValuesDigests(on: "plain"))
        #expect(try !store.listsWrittenValuesDigests(on: "sealed"))
        #expect(try !store.listsWrittenValuesDigests(on: "memory"))
    }
}
