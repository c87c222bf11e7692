import CloudSync
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The real transport: one URLSession per provider, at most `maxConcurrency` connections to a host.
///
/// Each instance owns its session, and with it libcurl's pool of kept-alive connections: make one per provider
/// (two providers never share connections or limits) and call ``close()`` from the provider's `close()`, which
/// lets requests in flight finish and then closes the connections; releasing the last reference does the same.
/// The session keeps no cookies and no cache. Its timeout is libcurl's idle timeout in whole seconds, a backstop
/// only: the operation's deadline is ``DeadlineLayer``'s job.
public final class URLSessionTransport: HTTPTransport {
    /// Nil once closed: libcurl closes the connections only when the session object goes away, which an
    /// invalidated session still referenced here never would.
    private let session: Mutex<URLSession?>

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
        session = Mutex(URLSession(configuration: configuration))
    }

    deinit { close() }

    /// Lets the requests in flight finish, then invalidates the session and closes its connections.
    ///
    /// A request sent afterwards fails with `ERR_CLOSED`. Calling it again does nothing.
    public func close() {
        let open = session.withLock { session in
            defer { session = nil }
            return session
        }
        open?.finishTasksAndInvalidate()
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        // A task on an invalidated session is a programming error to Foundation; here it is the caller's to handle.
        guard let session = session.withLock({ $0 }) else {
            throw CloudSyncError(
                .closed,
                "\(request.method) \(HTTPRedaction.redactedPath(request.url)) was not sent: the provider's HTTP session "
                    + "is closed")
        }
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        let hasBody = request.uploadFile != nil || !request.body.isEmpty
        if let destination = request.downloadFile, !hasBody {
            let (temporary, urlResponse) = try await Self.run { finish in
                session.downloadTask(with: urlRequest) { location, response, error in
                    // The file goes when this handler returns: keep it under a name of our own.
                    let kept = location.flatMap { location -> URL? in
                        let kept = FileManager.default.temporaryDirectory
                            .appendingPathComponent("cloudsync-download-\(UUID().uuidString)")
                        return (try? FileManager.default.moveItem(at: location, to: kept)) != nil ? kept : nil
                    }
                    finish(kept, response, error ?? (location != nil && kept == nil ? URLError(.cannotMoveFile) : nil))
                }
            }
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
            (data, urlResponse) = try await Self.run { finish in
                session.uploadTask(with: urlRequest, fromFile: file) { finish($0 ?? Data(), $1, $2) }
            }
        } else if hasBody {
            (data, urlResponse) = try await Self.run { finish in
                session.uploadTask(with: urlRequest, from: request.body) { finish($0 ?? Data(), $1, $2) }
            }
        } else {
            (data, urlResponse) = try await Self.run { finish in
                session.dataTask(with: urlRequest) { finish($0 ?? Data(), $1, $2) }
            }
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

    /// Starts the task `make` builds and waits for its completion handler, which must call `finish` once.
    ///
    /// URLSession's own async methods are not used: on Linux their cancellation handler cancels the task with a
    /// synchronous call onto the session's queue, made while the Swift runtime holds the cancelled task's status
    /// lock. When the session's queue is finishing that same request at that moment, it waits on that lock to resume
    /// the caller, and both wait forever. A test process hung so, a deadline cancelling a Drive request as it
    /// completed. Here the cancellation handler only sends the cancel from another queue, and returns.
    private static func run<Value: Sendable>(
        _ make: (@escaping @Sendable (Value?, URLResponse?, (any Error)?) -> Void) -> URLSessionTask
    ) async throws -> (Value, URLResponse) {
        let started = Mutex<(task: URLSessionTask?, cancelled: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make { value, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let value, let response {
                        continuation.resume(returning: (value, response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                let cancelled = started.withLock { started in
                    started.task = task
                    return started.cancelled
                }
                task.resume()
                if cancelled { task.cancel() }
            }
        } onCancel: {
            let task = started.withLock { started in
                started.cancelled = true
                return started.task
            }
            if let task { DispatchQueue.global().async { task.cancel() } }
        }
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
