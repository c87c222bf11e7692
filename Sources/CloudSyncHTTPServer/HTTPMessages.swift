import CloudSyncHTTP
import Foundation

/// A request as ``LoopbackHTTPServer`` received it, body read in full.
public struct ReceivedRequest: Sendable {
    /// The method as sent (`GET`, `PUT`, ...).
    public var method: String
    /// The path as sent, without the query and still percent-encoded (route captures are decoded); for an
    /// absolute-form target (`GET http://host/a HTTP/1.1`, as clients send to a proxy) the path part of it.
    public var path: String
    /// The request target exactly as the request line carried it (origin form `/a?b`, absolute form
    /// `http://host/a?b`, or `host:port` for `CONNECT`).
    public var target: String
    /// The query's items in order, percent-decoded (`+` is left as it is, as `URLComponents` does).
    public var queryItems: [URLQueryItem]
    /// The request's headers.
    public var headers: HTTPHeaders
    /// The body after any chunked transfer coding was removed; empty when there was none.
    public var body: Data
    /// Values of the route's `{name}` segments, percent-decoded.
    public var captures: [String: String]
    /// The server-assigned number of the connection the request came on (the first connection is 1).
    public var connectionID: Int
    /// The query as sent, still percent-encoded, for a server that reads `+` as a space as HTML forms and Google's
    /// APIs do (see ``formQuery(_:)``); empty when there was none.
    public var rawQuery = ""
    /// The scheme the request came in on: `https` on a server with TLS, else `http`.
    public var scheme = "http"
    /// The server's own `ADDRESS:PORT`, for ``origin`` when the request carried no `Host` header.
    public var serverAuthority = "127.0.0.1"

    /// A request, mostly for handler unit tests; the server builds its own.
    public init(
        method: String, path: String, target: String? = nil, queryItems: [URLQueryItem] = [],
        headers: HTTPHeaders = [:], body: Data = Data(), captures: [String: String] = [:], connectionID: Int = 0
    ) {
        self.method = method
        self.path = path
        self.target = target ?? path
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.captures = captures
        self.connectionID = connectionID
    }

    /// A request as a server read it: `target` exactly as the request line carried it, split here into ``path``,
    /// ``queryItems`` and ``rawQuery``.
    ///
    /// RFC 9112 §3.2.2: a server must accept the absolute form (what clients send to a proxy); the route is its path,
    /// and an empty path is "/".
    init(method: String, target: String, headers: HTTPHeaders, body: Data) {
        var originForm = Substring(target)
        if let scheme = target.range(of: "://"), target[..<scheme.lowerBound].allSatisfy(\.isLetter) {
            let afterAuthority = target[scheme.upperBound...].drop { $0 != "/" && $0 != "?" }
            originForm = afterAuthority.hasPrefix("/") ? afterAuthority : Substring("/" + afterAuthority)
        }
        var path = originForm
        var queryItems: [URLQueryItem] = []
        if let question = originForm.firstIndex(of: "?") {
            path = originForm[..<question]
            queryItems = Self.decodeQuery(originForm[originForm.index(after: question)...])
        }
        self.init(
            method: method, path: String(path), target: target, queryItems: queryItems, headers: headers, body: body)
        if let question = target.firstIndex(of: "?") {
            rawQuery = String(target[target.index(after: question)...])
        }
    }

    /// `a=1&b=x%20y` as items, percent-decoded; an item without `=` has a nil value.
    private static func decodeQuery(_ query: Substring) -> [URLQueryItem] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count > 1 ? String(parts[1]) : nil
            return URLQueryItem(
                name: name.removingPercentEncoding ?? name, value: value.map { $0.removingPercentEncoding ?? $0 })
        }
    }

    /// `SCHEME://HOST` as the client reached the server (`https://localhost:8443`): the scheme it came in on and its
    /// `Host` header (the server's address without one), for absolute URLs a handler hands back to that client.
    public var origin: String { "\(scheme)://\(headers["Host"] ?? serverAuthority)" }

    /// The first query value named `name` (exact case), or nil.
    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// The first value named `name` in ``rawQuery`` read as a form (`+` is a space, then percent-decoding), or nil.
    public func formQuery(_ name: String) -> String? {
        HTTPForm.pairs(rawQuery).first { $0.name == name }?.value
    }
}

// A route handler answers with ``HTTPResponse`` from `CloudSyncHTTP`; the server adds `Content-Length` (replacing
// any given, except a bodiless answer to `HEAD`, whose own length stands) and `Connection: close` when it closes,
// and never sends a body to `HEAD`.
extension HTTPResponse {
    /// A UTF-8 text answer (`text/plain; charset=utf-8` unless `headers` name another type).
    public static func text(_ status: Int, _ body: String = "", headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        if headers["Content-Type"] == nil { headers["Content-Type"] = "text/plain; charset=utf-8" }
        return HTTPResponse(status: status, headers: headers, body: Data(body.utf8))
    }

    /// A JSON response of `value`, keys sorted so bodies compare byte for byte.
    public static func json(_ value: some Encodable, status: Int = 200) -> HTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = (try? encoder.encode(value)) ?? Data("null".utf8)
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: body)
    }

    /// The error body every injected or unrouted answer carries: `{"error":{"code":...,"message":...}}` plus extras.
    static func error(_ status: Int, _ message: String, extra: [String: String] = [:]) -> HTTPResponse {
        struct Body: Encodable {
            struct Detail: Encodable {
                let code: Int
                let message: String
            }
            let error: Detail
            let method: String?
            let path: String?
        }
        return .json(
            Body(
                error: .init(code: status, message: message), method: extra["method"], path: extra["path"]),
            status: status)
    }
}

/// Reason phrases for status lines; clients ignore them, people reading captures do not.
func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 200: "OK"
    case 201: "Created"
    case 204: "No Content"
    case 206: "Partial Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 304: "Not Modified"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 409: "Conflict"
    case 412: "Precondition Failed"
    case 413: "Content Too Large"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: "Status \(status)"
    }
}
