import CloudSyncHTTP
import Foundation
import Synchronization

/// An HTTP transport for tests: answers from a closure or from a script of answers and errors, and records every
/// request it was sent and how many were in flight at once.
public final class TestTransport: HTTPTransport {
    private struct State {
        var requests: [HTTPRequest] = []
        var script: [Result<HTTPResponse, any Error>] = []
        var inFlight = 0
        var maxInFlight = 0
        var closeCount = 0
    }

    private let state = Mutex(State())
    private let handler: (@Sendable (HTTPRequest) async throws -> HTTPResponse)?

    /// Answers each request with `handler`.
    public init(_ handler: @escaping @Sendable (HTTPRequest) async throws -> HTTPResponse) {
        self.handler = handler
    }

    /// Answers requests from `script` in order; a request past its end fails the test's expectations with a 599.
    public init(script: [Result<HTTPResponse, any Error>]) {
        handler = nil
        state.withLock { $0.script = script }
    }

    /// Adds answers to the end of the script.
    public func enqueue(_ answers: Result<HTTPResponse, any Error>...) {
        state.withLock { $0.script += answers }
    }

    /// Every request sent, in order.
    public var requests: [HTTPRequest] { state.withLock { $0.requests } }
    /// Requests being answered now.
    public var inFlight: Int { state.withLock { $0.inFlight } }
    /// The most requests ever in flight at once.
    public var maxInFlight: Int { state.withLock { $0.maxInFlight } }

    /// How many times ``close()`` was called.
    public var closeCount: Int { state.withLock { $0.closeCount } }

    /// Counts the call; a test transport holds no connections.
    public func close() { state.withLock { $0.closeCount += 1 } }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let scripted = state.withLock { state -> Result<HTTPResponse, any Error>? in
            state.requests.append(request)
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            guard handler == nil else { return nil }
            return state.script.isEmpty
                ? .success(HTTPResponse(status: 599, body: Data("TestTransport: script exhausted".utf8)))
                : state.script.removeFirst()
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        if let handler { return try await handler(request) }
        var response = try scripted!.get()
        if let destination = request.downloadFile, response.isSuccess {
            try response.body.write(to: destination, options: .atomic)
            response.body = Data()
            response.bodyFile = destination
        }
        return response
    }
}
