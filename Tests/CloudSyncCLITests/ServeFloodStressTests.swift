import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync serve` under a connection flood from one address.
///
/// 400 connections trickle request heads a byte a second, then 3,000 send nothing (`scripts/http_abuse.py
/// flood`). The per-client cap refuses all but 64, the
/// head deadline drops those, a second address (127.0.0.2) is answered all along, memory stays under 100 MB, and
/// `/healthz` answers at once when the flood is gone.
///
/// A stress suite (`make test` runs those alone after the main suite): 3,400 sockets at once.
@Suite(
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct ServeFloodStressTests {
    @Test func idleAndSlowHeaderConnectionsAreCappedPerClientAndDroppedAtTheHeadDeadline() async throws {
        let served = try ServeHostileClientTests.Served()
        let (process, url) = try await served.start(["--head-timeout", "2", "--idle-timeout", "4"])
        let figures = try await ServeHostileClientTests.abuse([
            "flood", url.absoluteString, "--idle", "3000", "--slow", "400", "--second-source", "127.0.0.2",
        ])
        let open = try #require(figures["openEachSecond"] as? [Int], "\(figures)")
        // The first count is taken once every connection has been made: the server kept its per-client cap.
        #expect((open.first ?? .max) <= 64, "\(figures)")
        // The head deadline (2 s, checked every half second) and the idle timeout (4 s) freed every one.
        let closedAfter = try #require(figures["allClosedAfterSeconds"] as? Double, "\(figures)")
        #expect(closedAfter <= 10, "\(figures)")
        let second = try #require(figures["secondSource"] as? [String: Int])
        #expect(second["asked"] == second["ok"], "the second address was refused during the flood: \(figures)")
        #expect(figures["afterStatus"] as? Int == 200)
        #expect((figures["afterMs"] as? Int ?? .max) < 1000)
        #expect(try ServeHostileClientTests.peakMemory(process.pid) < 100 << 20)
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)
    }
}
