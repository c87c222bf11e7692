import CloudSync
import CloudSyncHTTP
import CloudSyncLocal
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@testable import CloudSyncCLI

/// A provider type that keeps its values on a loopback HTTP server, as the cloud providers keep theirs: every write
/// is a `PUT` through ``HTTPClient``, with the pipeline's token as a bearer token and an `access_token` query.
struct LoopbackKeyValueFactory: ProviderFactory {
    struct Configuration: Sendable {
        var url: String
        var token: String
    }

    var type: String { "loopback-kv" }
    var summary: String { "values on a loopback HTTP server (tests only)" }
    var fields: [ProviderField] {
        [
            ProviderField("url", .text, required: true, summary: "the server's base URL"),
            ProviderField("token", .text, required: true, secret: true, summary: "the access token"),
        ]
    }

    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(url: values.text("url") ?? "", token: values.text("token") ?? "")
    }

    func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities() }

    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        let transport = URLSessionTransport()
        let client = HTTPClient(
            transport: transport, context: context, authenticator: BearerToken(token: configuration.token),
            retryPolicy: RetryPolicy(maxAttempts: 1), timeout: .seconds(120))
        return LoopbackKeyValueProvider(
            wrapped: MemoryProvider(id: context.providerID), client: client, transport: transport,
            base: configuration.url, token: configuration.token)
    }
}

struct BearerToken: HTTPAuthenticator {
    let token: String
    func authorize(_ request: inout HTTPRequest) async throws { request.headers["Authorization"] = "Bearer \(token)" }
    func refresh(after response: HTTPResponse) async throws -> Bool { false }
}

struct LoopbackKeyValueProvider: ForwardingProvider {
    let wrapped: any Provider
    let client: HTTPClient
    let transport: URLSessionTransport
    let base: String
    let token: String

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        var results: [Result<Void, CloudSyncError>] = []
        for item in items {
            let url = URL(string: "\(base)/kv/\(item.key)?access_token=\(token)")!
            do {
                _ = try await client.sendExpectingSuccess(
                    HTTPRequest(method: .put, url: url, body: Data(item.value.utf8)))
                results.append(.success(()))
            } catch {
                results.append(.failure(error))
            }
        }
        _ = try await wrapped.set(items)
        return results
    }

    func close() async { transport.close() }
}

/// `--verbose` on the commands that open providers: each HTTP request a provider makes is one line on standard
/// error, credentials redacted; without it, none.
///
/// In process, with a registry holding the HTTP provider type above (the built binary has no HTTP provider yet).
@Suite(.serialized) struct VerboseTests {
    static let token = "SENTINEL-cli-5e6f7a8b9c0d"

    final class Output: Sendable {
        private let text = Mutex("")
        var value: String { text.withLock { $0 } }
        func append(_ piece: String) { text.withLock { $0 += piece } }
    }

    let directory: TemporaryDirectory
    let server: LoopbackHTTPServer

    init() throws {
        directory = try TemporaryDirectory()
        server = try LoopbackHTTPServer()
        server.route("PUT /kv/{key}") { _ in HTTPResponse(status: 204) }
    }

    /// The deadlines are incidental here and generous: with the suite and four busy loops on two cores, a loopback
    /// PUT took 8 s and the migrate ran out of the store's default 15 s.
    func pipeline() throws -> String {
        let path = directory.file("cloud.yaml")
        try """
        version: 1
        name: cloud
        providers:
          seed:
            type: memory
            items:
              favourites: '[1,2,3]'
              theme: dark
          cloud: { type: loopback-kv, url: "\(server.baseURL.absoluteString)", token: "${env:CLOUD_TOKEN}" }
        store:
          providers: [cloud]
          timeoutMs: 240000
        jobs:
          - { type: migrate, from: seed, to: cloud }

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func cloudsync(_ arguments: [String]) async -> (status: ExitCode, standardOutput: String, standardError: String) {
        var registry = BuiltInProviders.registry
        registry.register(LoopbackKeyValueFactory())
        let output = Output()
        let errors = Output()
        let tool = CommandLineTool(
            standardOutput: output.append, standardError: errors.append,
            environment: ["CLOUD_TOKEN": Self.token], registry: registry)
        let status = await tool.run(arguments)
        return (status, output.value, errors.value)
    }

    /// `debug: cloud: PUT /kv/theme?access_token=<redacted> -> 204 in 3 ms, sent 4 B, received 0 B`.
    static var requestLine: Regex<(Substring, Substring)> {
        #/debug: cloud: PUT /kv/(favourites|theme)\?access_token=<redacted> -> 204 in \d+ ms, sent \d+ B, received 0 B/#
    }

    @Test func runVerboseLogsEachRequestOnStandardError() async throws {
        let file = try pipeline()
        let result = await cloudsync(["run", file, "--verbose", "--report", directory.file("report.json")])
        #expect(result.status == .success, "\(result.standardError)")
        let lines = result.standardError.split(separator: "\n").map(String.init)
        let requests = lines.filter { $0.hasPrefix("debug: ") }
        #expect(requests.count == 2, "\(lines)")
        for line in requests { #expect(line.wholeMatch(of: Self.requestLine) != nil, "\(line)") }
        #expect(requests.contains { $0.contains("/kv/favourites?") && $0.contains("sent 7 B") })
        #expect(server.requestLog.count == 2)
        #expect(server.requestLog.allSatisfy { $0.headers["Authorization"] == "Bearer \(Self.token)" })
        #expect(!result.standardError.contains(Self.token) && !result.standardOutput.contains(Self.token))
        let report = try String(contentsOfFile: directory.file("report.json"), encoding: .utf8)
        #expect(!report.contains(Self.token))
        // That run gives SIGINT and SIGTERM back is not asserted here: other suites run `cloudsync run` in this
        // process at the same time, so the process-wide disposition is theirs at any moment.
    }

    @Test func withoutVerboseNothingAtDebugLevelIsPrinted() async throws {
        let file = try pipeline()
        for arguments in [["run", file, "--report", directory.file("report.json")], ["run", file, "-v", "-q"]] {
            server.clearLog()
            let result = await cloudsync(arguments)
            #expect(result.status == .success, "\(result.standardError)")
            #expect(server.requestLog.count == 2)
            let debug = result.standardError.split(separator: "\n").filter { $0.hasPrefix("debug: ") }
            #expect(debug.count == (arguments.contains("-v") ? 2 : 0), "\(arguments): \(result.standardError)")
        }
    }

    @Test func outboxFlushVerboseLogsTheRetriedWrites() async throws {
        let file = try pipeline()
        let state = directory.file(".cloudsync/cloud")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try SQLiteOutboxStorage(path: state + "/outbox.db").replace(
            OutboxEntry(
                id: 1, key: "theme", operation: .set, encodedValue: "light", provider: "cloud", attempts: 1,
                nextAttemptAtMs: 0, enqueuedAtMs: SystemClock().nowMilliseconds(), lastErrorCode: "ERR_OFFLINE"))
        let result = await cloudsync(["outbox", "flush", file, "--verbose"])
        #expect(result.status == .success, "\(result.standardError)")
        let lines = result.standardError.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.wholeMatch(of: Self.requestLine) != nil, "\(lines)")
        #expect(lines.first?.contains("sent 5 B") == true)
        #expect(lines.last == "drained 1, remaining 0, dropped 0")
        #expect(server.requestLog.map(\.bodySize) == [5])
    }
}
