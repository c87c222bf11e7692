import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// `NetworkHTTPServer` (libmicrohttpd) on its own: slow answers hold no other client, a request past the connection
/// cap gets 503, and stopping with answers still being computed waits for them instead of crashing.
///
/// Every blocking socket call runs off the cooperative pool (``offPool(_:)-swift.func``).
@Suite(.timeLimit(.minutes(2)))
struct NetworkHTTPServerTests {
    /// Answers `/slow` once `release` is signalled, everything else at once.
    final class Gated: HTTPResponder {
        let release = DispatchSemaphore(value: 0)
        let started = Atomic<Int>(0)

        func respond(to request: ReceivedRequest) -> HTTPResponse {
            if request.path == "/slow" {
                started.add(1, ordering: .relaxed)
                release.wait()
            }
            return .text(200, request.path)
        }
    }

    /// A raw exchange on a connection of its own: the status of the answer, 0 when the connection closed without.
    static func status(_ port: UInt16, _ head: String, timeout: Int = 10) -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return 0 }
        let bytes = Array(head.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
        guard count > 12 else { return 0 }
        return Int(String(decoding: buffer[9..<12], as: UTF8.self)) ?? 0
    }

    /// More slow answers than the machine has cores, as a database that hangs would make them.
    @Test func slowAnswersHoldNoOtherClient() async throws {
        let responder = Gated()
        let server = try NetworkHTTPServer(options: NetworkHTTPServer.Options(), responder: responder)
        defer { server.stop() }
        let port = server.port
        let slowCount = ProcessInfo.processInfo.activeProcessorCount + 4
        let slow = (0..<slowCount).map { _ in
            Task { await offPool { Self.status(port, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout: 60) } }
        }
        while responder.started.load(ordering: .relaxed) < slowCount { try await Task.sleep(for: .milliseconds(5)) }
        for _ in 0..<20 {
            let fast = await offPool {
                Self.status(port, "GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            }
            #expect(fast == 200)
        }
        for _ in 0..<slowCount { responder.release.signal() }
        for task in slow { #expect(await task.value == 200) }
    }

    @Test func aRequestPastTheConnectionCapGets503() async throws {
        var options = NetworkHTTPServer.Options()
        options.maxConnections = 2
        let server = try NetworkHTTPServer(options: options, responder: Gated())
        defer { server.stop() }
        // Two connections that send nothing hold the cap; a third is accepted (under the hard limit) and refused.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<2 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = server.port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            held.append(fd)
        }
        while server.openConnectionCount < 2 { try await Task.sleep(for: .milliseconds(5)) }
        let port = server.port
        #expect(await offPool { Self.status(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") } == 503)
        for fd in held { close(fd) }
        held = []
        while server.openConnectionCount > 0 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(await offPool { Self.status(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") } == 200)
    }

    @Test func stoppingWhileAnswersAreComputedWaitsForThem() async throws {
        let responder = Gated()
        let server = try NetworkHTTPServer(options: NetworkHTTPServer.Options(), responder: responder)
        let port = server.port
        let pending = (0..<4).map { _ in
            Task { await offPool { Self.status(port, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") } }
        }
        while responder.started.load(ordering: .relaxed) < 4 { try await Task.sleep(for: .milliseconds(5)) }
        let stopped = Task { await offPool { server.stop() } }
        // libmicrohttpd may not stop with a connection suspended: stop() waits for the four answers.
        try await Task.sleep(for: .milliseconds(50))
        for _ in 0..<4 { responder.release.signal() }
        await stopped.value
        for task in pending {
            let status = await task.value
            #expect(status == 200 || status == 0, "\(status)")
        }
        // The port is free again.
        #expect(await offPool { Self.status(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout: 2) } == 0)
    }
}
