import CloudSync
import CloudSyncCloudKit
import CloudSyncEmulator
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// A proxy in front of a service that lets another writer land a value just before each conditional change the
/// runner sends through it: the other writer reaches the service directly, between the runner's read and its change.
final class InterposingProxy: Sendable {
    /// How many values the other writer landed under each key.
    final class Landings: Sendable {
        let counts = Mutex<[String: Int]>([:])
    }

    let server: LoopbackHTTPServer
    private let landed = Landings()

    /// Forwards everything to `upstream`; before forwarding a request for which `keys` names keys, has `writer` store
    /// a value under each that no earlier write stored (so its version differs from anything read before).
    init(
        upstream: URL, keys: @escaping @Sendable (ReceivedRequest) -> [String], writer: any Provider
    ) throws {
        server = try LoopbackHTTPServer()
        let landed = self.landed
        for method in ["GET", "PUT", "POST", "DELETE", "HEAD"] {
            server.route(try HTTPRoutePattern(parsing: "\(method) /{path...}")) { request in
                let names = keys(request)
                if !names.isEmpty {
                    let items = landed.counts.withLock { counts in
                        names.map { name in
                            counts[name, default: 0] += 1
                            return KeyValue(name, "written by another device, time \(counts[name]!)")
                        }
                    }
                    let done = DispatchSemaphore(value: 0)
                    Task {
                        _ = try? await writer.set(items)
                        done.signal()
                    }
                    done.wait()
                }
                return ForwardingProxy.forward(request, to: upstream)
            }
        }
    }

    var endpoint: URL { server.baseURL }
    /// How many values the other writer landed under each key.
    var landings: [String: Int] { landed.counts.withLock { $0 } }
}

/// `move` and `mirror` through real services with another writer landing values between their reads and their
/// removals: no value of the other writer is removed, and each such key is counted `changedSinceRead`.
@Suite(.serialized, .timeLimit(.minutes(10))) struct OutsideWriterTests {
    static let keys = 20
    static let names = (0..<keys).map { "k\($0)" }

    /// The pipeline: fill `target` from a seed, move it all to a directory, then mirror an empty provider onto it
    /// (removing every key it holds, unless changed since listed).
    static func pipeline(target: String) -> String {
        let items = names.map { "      \($0): 'value \($0)'\n" }.joined()
        return """
            version: 1
            name: outside
            providers:
              seed:
                type: memory
                items:
            \(items)
              empty: { type: memory }
              local: { type: directory, path: data/local, create: true }
            \(target)
            store:
              providers: [local]
            jobs:
              - { type: migrate, name: fill, from: seed, to: target }
              - { type: move, name: move, from: target, to: local }
              - { type: mirror, name: prune, from: empty, to: target, maxDeletes: 100% }

            """
    }

    static func run(_ pipeline: String, in directory: TemporaryDirectory, environment: [String: String]) async throws
        -> [String: [String: Int]]
    {
        let file = directory.file("outside.yaml")
        try pipeline.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), ["run", "--report", "-", file],
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
            "no report: \(result.standardError)")
        let jobs = report["jobs"] as? [[String: Any]] ?? []
        return Dictionary(
            uniqueKeysWithValues: jobs.compactMap { job in
                (job["name"] as? String).map { ($0, job["counts"] as? [String: Int] ?? [:]) }
            })
    }

    /// What the runs must leave: every key at the target holding the other writer's last value, none removed by the
    /// move or the mirror, each counted changed since read by both.
    static func expectOtherWritersValuesKept(
        counts: [String: [String: Int]], proxy: InterposingProxy, target: any Provider
    ) async throws {
        #expect(counts["fill"]?["copied"] == keys, "\(counts)")
        #expect(counts["move"]?["moved"] == 0, "\(counts)")
        #expect(counts["move"]?["changedSinceRead"] == keys, "\(counts)")
        #expect(counts["prune"]?["deleted"] == 0, "\(counts)")
        #expect(counts["prune"]?["changedSinceRead"] == keys, "\(counts)")
        let landings = proxy.landings
        #expect(landings.count == keys && landings.values.allSatisfy { $0 == 2 }, "\(landings)")
        let values = try await target.get(names).map { try $0.get() }
        #expect(values == names.map { "written by another device, time \(landings[$0] ?? 0)" })
    }

    @Test func throughS3NoValueAnotherWriterLandsBeforeADeleteIsRemoved() async throws {
        let directory = try TemporaryDirectory()
        let moto = try await MotoS3Server.start(repository: Repository.root, buckets: ["outside"])
        let factory = S3ProviderFactory()
        let direct = try factory.make(
            try factory.configuration(
                from: ProviderFieldValues([
                    "bucket": .text("outside"), "endpoint": .text(moto.endpoint.absoluteString),
                    "accessKeyId": .text("outside"), "secretAccessKey": .text("outside"),
                ])),
            context: ProviderContext(providerID: "other", state: nil))
        // A conditional delete is one DeleteObject of /bucket/key; plain removals (none expected) are POST ?delete.
        let proxy = try InterposingProxy(
            upstream: moto.endpoint,
            keys: { request in
                guard request.method == "DELETE", request.path.hasPrefix("/outside/") else { return [] }
                return [String(request.path.dropFirst("/outside/".count))]
            }, writer: direct)
        defer { proxy.server.stop() }
        let target = """
              target:
                type: s3
                bucket: outside
                endpoint: ${env:S3}
                accessKeyId: outside
                secretAccessKey: outside
            """
        let counts = try await Self.run(
            Self.pipeline(target: target), in: directory,
            environment: ["S3": proxy.endpoint.absoluteString, "HOME": directory.path])
        try await Self.expectOtherWritersValuesKept(counts: counts, proxy: proxy, target: direct)
    }

    @Test func throughCloudKitNoValueAnotherWriterLandsBeforeADeleteIsRemoved() async throws {
        let directory = try TemporaryDirectory()
        let cloudKit = CloudKitEmulator()
        let emulators = try EmulatorServer(services: [cloudKit])
        defer { emulators.server.stop() }
        let container = "iCloud.com.example.outside"
        let factory = CloudKitProviderFactory()
        let direct = try factory.make(
            try factory.configuration(
                from: ProviderFieldValues([
                    "container": .text(container), "environment": .text("development"),
                    "apiToken": .text(CloudKitWebAuthEmulator.defaultAPIToken),
                    "webAuthToken": .text(
                        cloudKit.webAuth.issueToken(container: container, environment: "development")),
                    "endpoint": .text(emulators.baseURL.absoluteString), "timeoutMs": .integer(60_000),
                ])),
            context: ProviderContext(providerID: "other", state: nil))
        // A conditional removal is a `delete` operation with the record's change tag in records/modify.
        let proxy = try InterposingProxy(
            upstream: emulators.baseURL,
            keys: { request in
                guard request.method == "POST", request.path.hasSuffix("/records/modify"),
                    let body = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any],
                    let operations = body["operations"] as? [[String: Any]]
                else { return [] }
                return operations.compactMap { operation in
                    guard ["delete", "replace"].contains(operation["operationType"] as? String ?? "") else {
                        return nil
                    }
                    return (operation["record"] as? [String: Any])?["recordName"] as? String
                }
            }, writer: direct)
        defer { proxy.server.stop() }
        let target = """
              target:
                type: cloudKit
                container: \(container)
                environment: development
                apiToken: ${env:CK_API}
                webAuthToken: ${env:CK_WEB}
                endpoint: ${env:CLOUDKIT}
                timeoutMs: 60000
            """
        let counts = try await Self.run(
            Self.pipeline(target: target), in: directory,
            environment: [
                "CLOUDKIT": proxy.endpoint.absoluteString, "CK_API": CloudKitWebAuthEmulator.defaultAPIToken,
                "CK_WEB": cloudKit.webAuth.issueToken(container: container, environment: "development"),
                "HOME": directory.path,
            ])
        try await Self.expectOtherWritersValuesKept(counts: counts, proxy: proxy, target: direct)
    }
}
