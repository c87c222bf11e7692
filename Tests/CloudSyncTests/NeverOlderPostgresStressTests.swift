import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncPipelineState

/// The outbox's never-older property (``NeverOlderPropertyTests``) with its queue in PostgreSQL, as a pipeline with
/// `state: { postgresql }` keeps it: every seed's random interleaving of writes, faults, flushes, clears and account
/// switches ends with each key as its last acknowledged write.
///
/// A stress suite (`make test` runs those alone after the main suite): the outbox calls its storage synchronously from
/// the store's tasks, so each seed's hundreds of round trips to the server hold a thread of the shared pool while they
/// wait, which would starve the timing-sensitive tests running beside them.
@Suite(
    .serialized,
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct NeverOlderPostgresStressTests {
    /// `CLOUDSYNC_PROPERTY_SEEDS=N` runs seeds 0..<N, as the in-memory suite does; 60 unless told.
    static let seeds = Array(
        0..<UInt64(ProcessInfo.processInfo.environment["CLOUDSYNC_PROPERTY_SEEDS"].flatMap(Int.init) ?? 60))

    @Test(arguments: seeds)
    func everyKeyEndsAsItsLastAcknowledgedWriteWithThePostgresOutbox(seed: UInt64) async throws {
        let server = try await PostgresServer.shared()
        let spec = SharedStateSpec(
            url: Interpolated(value: server.url, written: "${env:URL}"), schema: PostgresServer.uniqueName("never"))
        let state = try await offPool { try PostgresStateDatabase(spec, pipeline: "seed-\(seed)") }
        defer { state.close() }
        try await NeverOlderPropertyTests().check(seed: seed, storage: PostgresOutboxStorage(state: state))
    }
}
