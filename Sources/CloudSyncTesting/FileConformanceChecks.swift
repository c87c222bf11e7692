import CloudSync
import Foundation

extension ProviderConformanceSuite {
    /// The checks every `FileStoringProvider` must pass besides ``run(_:)``'s, each on a fresh, empty, available
    /// provider from `makeProvider`; one line per broken requirement, empty when the provider conforms.
    ///
    /// The files are made in a temporary directory of the suite's own: binary bytes (every byte value) past several
    /// chunk boundaries, an empty file, a replacement by a shorter file.
    public static func runFiles(_ makeProvider: @Sendable () async throws -> any FileStoringProvider) async -> [String]
    {
        var failures: [String] = []
        for check in fileChecks {
            do {
                let scratch = try TemporaryDirectory(prefix: "cloudsync-file-conformance")
                let provider = try await makeProvider()
                var sink = Failures(name: check.name)
                try await check.body(provider, scratch, &sink)
                await provider.close()
                failures += sink.messages
            } catch {
                failures.append("\(check.name): threw \(error)")
            }
        }
        return failures
    }

    /// `count` bytes cycling through every byte value from `start`: not UTF-8, and no two chunks alike.
    public static func fileBytes(count: Int, start: UInt8 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &+ Int(start) &+ $0 / 256) })
    }

    typealias FileCheck = (
        name: String, body: @Sendable (any FileStoringProvider, TemporaryDirectory, inout Failures) async throws -> Void
    )

    /// `data` written to a new file in `scratch`; its path.
    static func source(_ data: Data, named name: String, in scratch: TemporaryDirectory) throws -> String {
        let path = scratch.file(name)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// What `provider` gives back for `key`: nil when `getFile` says it holds nothing (after checking it left the
    /// destination empty).
    static func fetched(_ key: String, from provider: any FileStoringProvider, in scratch: TemporaryDirectory)
        async throws -> Data?
    {
        let destination = scratch.file("fetched-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: destination, contents: nil)
        let size = try await provider.fileSize(key)
        let found = try await provider.getFile(key, to: destination, size: size ?? 0)
        let data = try Data(contentsOf: URL(fileURLWithPath: destination))
        return found ? data : (data.isEmpty ? nil : Data("<getFile said no file, yet wrote bytes>".utf8))
    }

    static let fileChecks: [FileCheck] = [
        (
            "a binary file round-trips byte for byte",
            { provider, scratch, failures in
                let data = fileBytes(count: 3 * (1 << 20) + 17)
                try await provider.putFile(
                    "conformance.file-bin", from: try source(data, named: "in", in: scratch), size: Int64(data.count))
                let size = try await provider.fileSize("conformance.file-bin")
                failures.expect(size == Int64(data.count), "fileSize is \(String(describing: size)), not \(data.count)")
                let back = try await fetched("conformance.file-bin", from: provider, in: scratch)
                failures.expect(
                    back == data, "getFile gave \(back?.count ?? -1) bytes that differ from the \(data.count) put")
            }
        ),
        (
            "an empty file is a file",
            { provider, scratch, failures in
                try await provider.putFile(
                    "conformance.empty", from: try source(Data(), named: "in", in: scratch), size: 0)
                let size = try await provider.fileSize("conformance.empty")
                failures.expect(size == 0, "fileSize of an empty file is \(String(describing: size)), not 0")
                let back = try await fetched("conformance.empty", from: provider, in: scratch)
                failures.expect(back == Data(), "getFile of an empty file gave \(String(describing: back))")
            }
        ),
        (
            "a key without a file has no file",
            { provider, scratch, failures in
                let size = try await provider.fileSize("conformance.missing")
                failures.expect(size == nil, "fileSize of a missing key is \(String(describing: size))")
                let back = try await fetched("conformance.missing", from: provider, in: scratch)
                failures.expect(back == nil, "getFile of a missing key gave \(String(describing: back))")
            }
        ),
        (
            "a put replaces the whole file",
            { provider, scratch, failures in
                let long = fileBytes(count: 70_000, start: 1)
                let short = fileBytes(count: 1_000, start: 2)
                try await provider.putFile(
                    "conformance.replaced", from: try source(long, named: "long", in: scratch), size: Int64(long.count))
                try await provider.putFile(
                    "conformance.replaced", from: try source(short, named: "short", in: scratch),
                    size: Int64(short.count))
                let back = try await fetched("conformance.replaced", from: provider, in: scratch)
                failures.expect(back == short, "after a shorter put, getFile gave \(back?.count ?? -1) bytes, not 1000")
            }
        ),
        (
            "files share the key space: listed, and removed by remove",
            { provider, scratch, failures in
                let data = fileBytes(count: 10)
                try await provider.putFile(
                    "conformance.listed", from: try source(data, named: "in", in: scratch), size: Int64(data.count))
                if provider.capabilities.canList {
                    let keys = try await listEverything(provider, limit: 100)
                    failures.expect(keys == ["conformance.listed"], "the listing is \(keys), not the file's key")
                }
                let removed = try await provider.remove(["conformance.listed"])
                failures.expect(allSucceeded(removed), "remove of a file's key failed: \(removed)")
                let size = try await provider.fileSize("conformance.listed")
                failures.expect(size == nil, "after remove, fileSize is \(String(describing: size))")
            }
        ),
    ]
}
