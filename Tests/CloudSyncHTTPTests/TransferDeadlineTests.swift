import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// A request that moves a file gets one timeout per MiB started, so a large upload or download is not cut off at the
/// deadline of a small request, and a request that moves no file keeps the plain timeout.
@Suite struct TransferDeadlineTests {
    @Test(
        arguments: [
            (nil, 1), (0, 1), (1, 1), (1 << 20, 1), ((1 << 20) + 1, 2), (3 * (1 << 20) + 1, 4), (50_000_000, 48),
        ] as [(Int64?, Int64)])
    func theDeadlineGrowsWithTheBytesMoved(bytes: Int64?, timeouts: Int64) async throws {
        let clock = ManualClock()
        let seen = Mutex<Int64?>(nil)
        let transport = TestTransport { request in
            seen.withLock { $0 = request.deadlineMilliseconds }
            return HTTPResponse(status: 200)
        }
        let layer = DeadlineLayer(next: transport, clock: clock, timeout: .seconds(15))
        var request = HTTPRequest(method: .put, url: URL(string: "http://127.0.0.1/upload")!)
        request.transferBytes = bytes
        _ = try await layer.send(request)
        #expect(seen.withLock { $0 } == clock.nowMilliseconds() + 15_000 * timeouts)
    }
}
