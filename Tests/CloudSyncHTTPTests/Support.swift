import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization

/// A request to a test URL.
func request(_ method: HTTPMethod = .get, _ path: String = "/v1/item", body: String = "") -> HTTPRequest {
    HTTPRequest(method: method, url: URL(string: "https://api.example.test\(path)")!, body: Data(body.utf8))
}

/// A client over `transport` on `clock`, with a fixed jitter of one half.
func client(
    _ transport: any HTTPTransport, clock: ManualClock, metrics: ProviderMetrics = ProviderMetrics(),
    logger: ProviderLogger = .disabled, authenticator: any HTTPAuthenticator = NoAuthentication(),
    policy: RetryPolicy = RetryPolicy(random: { 0.5 }), timeout: Duration? = .seconds(30), maxConcurrency: Int = 8
) -> HTTPClient {
    HTTPClient(
        transport: transport,
        context: ProviderContext(providerID: "p1", clock: clock, metrics: metrics, logger: logger),
        authenticator: authenticator, retryPolicy: policy, timeout: timeout, maxConcurrency: maxConcurrency)
}

/// Runs `send` in a task, so a test can move the clock while it waits.
func start(_ client: HTTPClient, _ request: HTTPRequest) -> Task<Result<HTTPResponse, CloudSyncError>, Never> {
    Task {
        do throws(CloudSyncError) { return .success(try await client.send(request)) } catch { return .failure(error) }
    }
}

extension Result where Failure == CloudSyncError {
    var error: CloudSyncError? {
        if case .failure(let error) = self { return error }
        return nil
    }
    var value: Success? { try? get() }
}

/// Collects log lines.
final class LogSink: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var logger: ProviderLogger {
        ProviderLogger(minimumLevel: .debug) { _, line in self.lines.withLock { $0.append(line) } }
    }
}
