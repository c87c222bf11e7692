import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The proxy's request log is what `cloudsync-bench requests` counts for S3 (moto has no count of its own): it must
/// hold each request exactly once, as the server behind it received it, failures included.
@Suite struct ForwardingProxyTests {
    @Test func theProxyLogsEachRequestOnceAsTheServerBehindItReceivedIt() async throws {
        let upstream = try LoopbackHTTPServer()
        defer { upstream.stop() }
        upstream.route("GET /objects/{name}") { request in .text(200, "value of \(request.captures["name"]!)") }
        upstream.route("PUT /objects/{name}") { _ in HTTPResponse(status: 200) }
        upstream.route("POST /batch") { _ in .text(500, "try again") }
        let proxy = try ForwardingProxy(upstream: upstream.baseURL)
        defer { proxy.server.stop() }

        let transport = URLSessionTransport(maxConcurrency: 8)
        defer { transport.close() }
        let requests =
            (0..<20).map { HTTPRequest(method: .put, url: proxy.server.url("/objects/o\($0)"), body: Data("v".utf8)) }
            + (0..<20).map { HTTPRequest(method: .get, url: proxy.server.url("/objects/o\($0)")) }
            + [HTTPRequest(method: .post, url: proxy.server.url("/batch"), body: Data("x".utf8))]
        let statuses = await withTaskGroup(of: Int.self) { group in
            for request in requests {
                group.addTask { (try? await transport.send(request))?.status ?? 0 }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.sorted() == Array(repeating: 200, count: 40) + [500])

        func tally(_ log: [HTTPLogEntry]) -> [String: Int] {
            log.reduce(into: [:]) { $0["\($1.method) \($1.path)", default: 0] += 1 }
        }
        #expect(proxy.server.requestLog.count == 41)
        #expect(upstream.requestLog.count == 41)
        #expect(tally(proxy.server.requestLog) == tally(upstream.requestLog))
    }
}
