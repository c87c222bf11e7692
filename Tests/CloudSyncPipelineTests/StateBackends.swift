import CloudSync
import CloudSyncPostgres
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// Where a test's pipeline keeps its state: the two implementations every run-session test runs against.
enum StateKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case directory
    case postgresql

    var testDescription: String { rawValue }
}

/// One test's state: the directory default, or a PostgreSQL schema of the test's own on the suite's shared server
/// (so tests running at once never meet), named to pipelines through `${env:CLOUDSYNC_TEST_STATE_URL}`.
struct TestState: Sendable {
    static let urlVariable = "CLOUDSYNC_TEST_STATE_URL"

    let kind: StateKind
    let schema: String
    let url: String?

    init(_ kind: StateKind) async throws {
        self.kind = kind
        schema = PostgresServer.uniqueName("s")
        url = kind == .postgresql ? try await PostgresServer.shared().url : nil
    }

    /// The `state:` line a pipeline file needs for this state; empty for the directory default.
    var line: String {
        kind == .postgresql ? "state: { postgresql: \"${env:\(Self.urlVariable)}\", schema: \(schema) }\n" : ""
    }

    /// `source` with ``line`` after its `name:` line.
    func applied(to source: String) -> String {
        guard !line.isEmpty, let range = source.range(of: "\nname: ") else { return source }
        let end = source[range.upperBound...].firstIndex(of: "\n") ?? source.endIndex
        return String(source[..<end]) + "\n" + line.dropLast() + String(source[end...])
    }

    /// `environment` with the server's URL in it.
    func environment(_ environment: [String: String] = [:]) -> [String: String] {
        var environment = environment
        if let url { environment[Self.urlVariable] = url }
        return environment
    }

    /// The state of pipeline `compiled`, opened for writing without a lock, to look at or prepare what a run sees.
    func open(_ compiled: CompiledPipeline, codec: (any ValueCodec)? = nil) throws -> any PipelineState {
        if let shared = compiled.spec.sharedState {
            return try PostgresStateDatabase(shared, pipeline: compiled.spec.name, codec: codec)
        }
        try FileManager.default.createDirectory(atPath: compiled.spec.state, withIntermediateDirectories: true)
        return try StateDatabase(path: compiled.spec.state + "/state.db", codec: codec)
    }

    /// The stored (sealed) text of every provider value of this state, read around the implementation.
    func rawProviderValues(_ compiled: CompiledPipeline) async throws -> [String] {
        guard let url else {
            let database = try SQLiteDatabase(path: compiled.spec.state + "/state.db")
            return try await database.read { (db: SQLiteConnection) in
                try db.query("SELECT value FROM provider_values") { $0.string(0) ?? "" }
            }
        }
        let connection = try await PostgresConnection.connect(url)
        let rows = try await connection.execute(
            "SELECT value FROM \"\(schema)\".provider_values WHERE pipeline = $1", [.text(compiled.spec.name)])
        await connection.close()
        return rows.rows.map { String(decoding: $0[0].bytes ?? [], as: UTF8.self) }
    }
}
