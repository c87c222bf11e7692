import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The real transport: one URLSession per provider, at most `maxConcurrency` connections to a host.
///
/// The session keeps no cookies and no cache. Its timeout is libcurl's idle timeout in whole seconds, a backstop
/// only: the operation's deadline is ``DeadlineLayer``'s job.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// A session allowing `maxConcurrency` connections per host, giving up on a connection silent for `idleTimeout`
    /// (rounded down to whole seconds, at least one).
    public init(maxConcurrency: Int = 8, idleTimeout: Duration = .seconds(60)) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = max(1, maxConcurrency)
        configuration.timeoutIntervalForRequest = TimeInterval(max(1, idleTimeout.components.seconds))
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        let hasBody = request.uploadFile != nil || !request.body.isEmpty
        if let destination = request.downloadFile, !hasBody {
            let (temporary, urlResponse) = try await session.download(for: urlRequest)
            var response = try Self.response(urlResponse)
            defer { try? FileManager.default.removeItem(at: temporary) }
            if response.isSuccess {
                _ = try? FileManager.default.removeItem(at: destination)
                try FileManager.default.moveItem(at: temporary, to: destination)
                response.bodyFile = destination
            } else {
                // An error answer is small and the error mapping wants its reason.
                response.body = (try? Data(contentsOf: temporary)) ?? Data()
            }
            return response
        }
        let data: Data
        let urlResponse: URLResponse
        if let file = request.uploadFile {
            (data, urlResponse) = try await session.upload(for: urlRequest, fromFile: file)
        } else if hasBody {
            (data, urlResponse) = try await session.upload(for: urlRequest, from: request.body)
        } else {
            (data, urlResponse) = try await session.data(for: urlRequest)
        }
        var response = try Self.response(urlResponse)
        response.body = data
        if let destination = request.downloadFile, response.isSuccess {
            try data.write(to: destination, options: .atomic)
            response.body = Data()
            response.bodyFile = destination
        }
        return response
    }

    private static func response(_ urlResponse: URLResponse) throws -> HTTPResponse {
        guard let http = urlResponse as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            headers.add(String(describing: name), String(describing: value))
        }
        return HTTPResponse(status: http.statusCode, headers: headers)
    }
}
