import CloudSyncHTTP
import CloudSyncHTTPServer
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A loopback server that forwards every request to another server (moto, say) and returns its answer, so a test can
/// put the loopback server's fault plans, request log and latency in front of a peer that has none of its own.
public final class ForwardingProxy: Sendable {
    /// The server clients talk to; set fault plans on it.
    public let server: LoopbackHTTPServer
    /// Where requests go.
    public let upstream: URL

    /// A proxy on a free loopback port forwarding to `upstream` (`http://127.0.0.1:PORT`).
    public init(upstream: URL) throws {
        self.upstream = upstream
        server = try LoopbackHTTPServer()
        for method in ["GET", "PUT", "POST", "DELETE", "HEAD", "PATCH"] {
            server.route(try HTTPRoutePattern(parsing: "\(method) /{path...}")) { request in
                Self.forward(request, to: upstream)
            }
        }
    }

    /// The proxy's base URL, for clients.
    public var endpoint: URL { server.baseURL }

    /// Sends `request` on to `upstream` with its path, query (as encoded), headers and body, and returns the answer;
    /// 502 when upstream does not answer.
    public static func forward(_ request: ReceivedRequest, to upstream: URL) -> HTTPResponse {
        let target = request.path + (request.rawQuery.isEmpty ? "" : "?" + request.rawQuery)
        guard let url = URL(string: upstream.absoluteString + target) else {
            return HTTPResponse.text(400, "the proxy cannot forward \(target)")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        let hopByHop: Set<String> = ["host", "content-length", "connection", "expect", "transfer-encoding"]
        for field in request.headers where !hopByHop.contains(field.name.lowercased()) {
            urlRequest.addValue(field.value, forHTTPHeaderField: field.name)
        }
        if !request.body.isEmpty { urlRequest.httpBody = request.body }
        let answer = Mutex<HTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: urlRequest) { data, response, _ in
            if let http = response as? HTTPURLResponse {
                var headers = HTTPHeaders()
                // The server sets the length of the body it sends; a HEAD answer has none, so upstream's stands.
                var dropped: Set<String> = ["transfer-encoding", "connection"]
                if request.method != "HEAD" { dropped.insert("content-length") }
                for (name, value) in http.allHeaderFields {
                    let name = String(describing: name)
                    if dropped.contains(name.lowercased()) { continue }
                    headers.add(name, String(describing: value))
                }
                answer.withLock { $0 = HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data()) }
            }
            done.signal()
        }.resume()
        done.wait()
        return answer.withLock { $0 } ?? HTTPResponse.text(502, "the upstream server did not answer")
    }
}
