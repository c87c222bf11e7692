import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

struct MissingPeer: Error, CustomStringConvertible {
    let description: String
}

/// A `LoopbackHTTPServer` in front of moto: forwards every request, logs it (so tests count requests), applies the
/// server's fault plans, and lets a test answer chosen requests itself (an S3 `SlowDown`).
final class S3Proxy: Sendable {
    let server: LoopbackHTTPServer
    private let upstream: URL
    private let interceptor = Mutex<(@Sendable (ReceivedRequest) -> HTTPResponse?)?>(nil)

    init(upstream: URL) throws {
        self.upstream = upstream
        server = try LoopbackHTTPServer()
        for method in ["GET", "PUT", "POST", "DELETE", "HEAD"] {
            server.route(try HTTPRoutePattern(parsing: "\(method) /{path...}")) { [self] request in
                if let answer = interceptor.withLock({ $0 })?(request) { return answer }
                return forward(request)
            }
        }
    }

    var endpoint: URL { server.baseURL }

    /// Answers requests `intercept` returns a response for; nil goes on to moto.
    func intercept(_ intercept: (@Sendable (ReceivedRequest) -> HTTPResponse?)?) {
        interceptor.withLock { $0 = intercept }
    }

    /// The logged requests of `method` whose query has an item named `query` (or any, for nil).
    func count(_ method: String, query: String? = nil) -> Int {
        server.requestLog.filter { entry in
            entry.method == method && (query.map { name in entry.queryItems.contains { $0.name == name } } ?? true)
        }.count
    }

    private func forward(_ request: ReceivedRequest) -> HTTPResponse {
        ForwardingProxy.forward(request, to: upstream)
    }
}

/// An S3 error answer as S3 writes it.
func s3Error(_ status: Int, _ code: String, _ message: String = "", extra: String = "") -> HTTPResponse {
    HTTPResponse(
        status: status, headers: ["Content-Type": "application/xml"],
        body: Data(
            (#"<?xml version="1.0" encoding="UTF-8"?>"#
                + "<Error><Code>\(code)</Code><Message>\(message)</Message>\(extra)<RequestId>1</RequestId></Error>")
                .utf8))
}

let testCredentials = S3Credentials(accessKeyID: "AKIATESTKEY", secretAccessKey: "test/secret+key")

/// A provider on `bucket` at `endpoint` under `prefix`, retrying quickly.
func makeProvider(
    endpoint: URL, bucket: String, prefix: String = "", id: String = "bucket", pathStyle: Bool = true,
    metrics: ProviderMetrics = ProviderMetrics(), maxAttempts: Int = 4, timeout: Duration = .seconds(60),
    logger: ProviderLogger = .disabled
) -> S3Provider {
    S3Provider(
        location: S3Location(endpoint: endpoint, bucket: bucket, region: "us-east-1", pathStyle: pathStyle),
        prefix: prefix, credentials: testCredentials, transport: URLSessionTransport(maxConcurrency: 16),
        context: ProviderContext(providerID: id, metrics: metrics, logger: logger), timeout: timeout,
        maxConcurrency: 16,
        retryPolicy: RetryPolicy(maxAttempts: maxAttempts, baseDelay: .milliseconds(5), maxDelay: .milliseconds(50)))
}
