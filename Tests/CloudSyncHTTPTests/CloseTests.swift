import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

@Suite struct CloseTests {
    @Test func closingTheClientClosesTheTransportThroughEveryLayer() async throws {
        let transport = TestTransport(script: [])
        let http = HTTPClient(
            transport: transport, context: ProviderContext(providerID: "p"), authenticator: NoAuthentication())
        http.close()
        #expect(transport.closeCount == 1)
    }

    @Test func aClosedURLSessionTransportRefusesRequestsWithErrClosed() async throws {
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        server.route("GET /ping") { _ in .text(200, "pong") }
        let http = HTTPClient(transport: URLSessionTransport(), context: ProviderContext(providerID: "p"))
        let url = URL(string: "http://127.0.0.1:\(server.port)/ping")!
        #expect(try await http.send(HTTPRequest(method: .get, url: url)).status == 200)
        http.close()
        let error = await #expect(throws: CloudSyncError.self) {
            try await http.send(HTTPRequest(method: .get, url: url))
        }
        #expect(error?.code == .closed)
        #expect(server.requestLog.count == 1)
    }
}
