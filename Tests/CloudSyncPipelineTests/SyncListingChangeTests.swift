import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// A directory provider that, once armed, runs `change` after its listing hands out its first page (as another
/// process editing the directory would, midway through a sync).
private struct ChangingDirectoryFactory: ProviderFactory {
    struct Configuration: Sendable { var path: String }
    let change: @Sendable () async throws -> Void
    let armed = Counter()
    let fired = Counter()

    var type: String { "changing-directory" }
    var summary: String { "a directory edited after its first listing page" }
    var fields: [ProviderField] { [ProviderField("path", .path, required: true, summary: "the root")] }

    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(path: values.text("path") ?? "")
    }

    func capabilities(of configuration: Configuration) -> ProviderCapabilities {
        DirectoryProvider.capabilities(maxValueBytes: nil)
    }

    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        ChangingDirectory(
            wrapped: try DirectoryProvider(id: context.providerID, root: configuration.path), factory: self)
    }

    struct ChangingDirectory: ForwardingProvider {
        let wrapped: any Provider
        let factory: ChangingDirectoryFactory

        func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
            let page = try await wrapped.listKeys(after: cursor, limit: limit)
            if page.nextCursor != nil, factory.armed.value > 0, factory.fired.next() == 0 {
                try await factory.change()
            }
            return page
        }
    }
}

@Suite struct SyncListingChangeTests {
    private func key(_ index: Int) -> String { String(format: "key.%05d", index) }

    /// Files removed and added in a directory between the pages of a sync's listing: no key that stayed put is taken
    /// for deleted, the removed one is deleted everywhere exactly once (in that run when its copies were read, or in
    /// the next when the stale listing's tag vouched for it), and the next run brings the added ones over.
    @Test func filesChangedBetweenListingPagesNeverLookDeleted() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("data/files")
        let keys = (0..<2500).map { key($0 * 2) }
        let files = try DirectoryProvider(id: "files", root: root)
        _ = try await files.set(keys.map { KeyValue($0, "v") })
        let removed = key(4000)
        let added = [key(1), key(4001)]
        let factory = ChangingDirectoryFactory {
            let editor = try DirectoryProvider(id: "editor", root: root)
            _ = try await editor.remove([removed])
            _ = try await editor.set(added.map { KeyValue($0, "new") })
        }
        let source = """
            version: 1
            name: changing
            providers:
              db: { type: sqlite, path: data/db.db, create: true }
              files: { type: changing-directory, path: data/files }
            store: { providers: [db, files] }
            jobs:
              - { type: sync, name: both, maxDeletes: "100%" }
            """
        func run() async throws -> RunReport.Job {
            var registry = BuiltInProviders.registry
            registry.register(factory)
            let spec = try PipelineLoader.load(
                source: source, file: "p.yaml", directory: directory.path, registry: registry, environment: [:])
            return try await PipelineRunner(try PipelineCompiler.compile(spec, environment: [:]), options: RunOptions())
                .run().report.jobs[0]
        }
        func databaseKeys() async throws -> Set<String> {
            let database = try SQLiteProvider(id: "db", path: directory.file("data/db.db"))
            let listed = try await listEveryKey(of: database)
            await database.close()
            return Set(listed)
        }
        // The first run copies every file to the database and leaves the snapshot.
        #expect(try await run().status == .ok)
        #expect(try await databaseKeys() == Set(keys))
        // The second is changed under midway: the removal is a deletion, and nothing that stayed put is.
        factory.armed.next()
        let changed = try await run()
        #expect(changed.status == .ok, "\(String(describing: changed.error))")
        #expect(factory.fired.value > 0)
        let afterChange = try await databaseKeys()
        #expect(Set(keys).subtracting([removed]).isSubset(of: afterChange))
        // The third brings over whatever the second did not see.
        let third = try await run()
        #expect(third.status == .ok)
        #expect((changed.counts["deleted"] ?? 0) + (third.counts["deleted"] ?? 0) == 1)
        let expected = Set(keys).subtracting([removed]).union(added)
        #expect(try await databaseKeys() == expected)
        #expect(Set(try await listEveryKey(of: files)) == expected)
    }
}
