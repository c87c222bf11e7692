import CloudSyncHTTP
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a person's browser does in a sign-in test: opens an address and follows its redirects (to a loopback
/// listener), or stops at the first answer so the test can read a redirect's `Location`.
public enum TestBrowser {
    /// Opens `url`, following redirects, and returns the last answer.
    public static func open(_ url: URL) async throws -> HTTPResponse {
        try await fetch(url, followRedirects: true)
    }

    /// Fetches `url` once; a redirect comes back as it is (status 302 and its `Location`).
    public static func fetchWithoutRedirect(_ url: URL) async throws -> HTTPResponse {
        try await fetch(url, followRedirects: false)
    }

    private static func fetch(_ url: URL, followRedirects: Bool) async throws -> HTTPResponse {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        let session = URLSession(
            configuration: configuration, delegate: followRedirects ? nil : RedirectRefuser(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: URLRequest(url: url))
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields { headers.add(String(describing: name), String(describing: value)) }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}

/// Stops a session at the first redirect.
private final class RedirectRefuser: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
