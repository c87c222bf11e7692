import Foundation

/// Header fields in the order they came or were added; names compare without regard to case.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// One header line.
    public struct Field: Sendable, Equatable {
        /// The name as written (compared case-insensitively by ``HTTPHeaders``).
        public var name: String
        /// The value with surrounding white space removed.
        public var value: String

        /// A field named `name` with `value`.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Every field, in order, repeated names included.
    public private(set) var fields: [Field]

    /// Headers holding `fields` in that order.
    public init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// Headers from name-value pairs, in the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { Field(name: $0.0, value: $0.1) }
    }

    /// The first value named `name` (any case); setting replaces every field of that name, nil removes them.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
            if let newValue { fields.append(Field(name: name, value: newValue)) }
        }
    }

    /// Every value named `name` (any case), in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// Appends a field, keeping any others of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }
}

/// A request as ``LoopbackHTTPServer`` received it, body read in full.
public struct HTTPRequest: Sendable {
    /// The method as sent (`GET`, `PUT`, ...).
    public var method: String
    /// The path as sent, without the query and still percent-encoded (route captures are decoded).
    public var path: String
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

    /// A request, mostly for handler unit tests; the server builds its own.
    public init(
        method: String, path: String, queryItems: [URLQueryItem] = [], headers: HTTPHeaders = [:], body: Data = Data(),
        captures: [String: String] = [:], connectionID: Int = 0
    ) {
        self.method = method
        self.path = path
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.captures = captures
        self.connectionID = connectionID
    }

    /// The first query value named `name` (exact case), or nil.
    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

/// What a route handler answers; the server adds `Content-Length` (and `Connection: close` when it closes).
public struct HTTPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Headers to send; a `Content-Length` here is replaced by the body's real length.
    public var headers: HTTPHeaders
    /// The body, sent whole (never for `HEAD`).
    public var body: Data

    /// A response with `status`, `headers` and `body`.
    public init(status: Int = 200, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A UTF-8 text response (`text/plain; charset=utf-8`).
    public static func text(_ text: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
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
    case 500: "Internal Server Error"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    default: "Status \(status)"
    }
}
