import CloudSync
import Foundation

/// An HTTP method; the idempotent ones may be sent again after a failure.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method as it goes on the wire (`GET`).
    public let rawValue: String

    /// A method from its wire text, upper-cased.
    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }

    public static let get = HTTPMethod(rawValue: "GET")
    public static let head = HTTPMethod(rawValue: "HEAD")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let patch = HTTPMethod(rawValue: "PATCH")
    public static let delete = HTTPMethod(rawValue: "DELETE")
    public static let options = HTTPMethod(rawValue: "OPTIONS")

    /// Whether RFC 9110 calls the method idempotent: sending it twice has the effect of sending it once.
    public var isIdempotent: Bool {
        [Self.get, .head, .put, .delete, .options].contains(self)
    }

    /// The wire text.
    public var description: String { rawValue }
}

/// Header fields in order, looked up without regard to case as RFC 9110 requires.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields in the order they were added.
    public private(set) var fields: [(name: String, value: String)]

    /// Headers from `fields`, in order.
    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }

    /// Headers from a literal such as `["Content-Type": "application/json"]`.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of `name`, or nil; setting replaces every field of that name (nil removes them).
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
            if let newValue { fields.append((name: name, value: newValue)) }
        }
    }

    /// Every value of `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// Adds a field without removing others of the same name.
    public mutating func add(_ name: String, _ value: String) { fields.append((name: name, value: value)) }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// Equal when the same fields come in the same order.
    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0 == $1 }
    }
}

/// One HTTP request as the layers pass it down: what to send, and how the layers may treat it.
public struct HTTPRequest: Sendable, CustomStringConvertible {
    /// The method.
    public var method: HTTPMethod
    /// The full URL, query included.
    public var url: URL
    /// The header fields; the auth layer adds its own.
    public var headers: HTTPHeaders
    /// The body held in memory; ignored when ``uploadFile`` is set.
    public var body: Data
    /// Sends the body from this file instead of memory, for values too large to hold twice.
    public var uploadFile: URL?
    /// Writes the response body of a successful (2xx) answer to this file instead of memory; the file is replaced.
    public var downloadFile: URL?
    /// Marks a non-idempotent request (a `POST`) as safe to send again, because the server deduplicates it.
    public var isRetrySafe: Bool
    /// When the operation this request belongs to must be over, in milliseconds on the client's clock; the
    /// deadline layer sets it from its timeout when nil, and the retry layer never waits past it.
    public var deadlineMilliseconds: Int64?
    /// How many bytes of a file this request moves (its upload or download), when it moves one: the deadline layer
    /// then gives it one timeout per ``bytesPerTimeout`` started, so a large file has time in proportion to its size
    /// and a stalled transfer is still cut off.
    public var transferBytes: Int64?

    /// How many bytes a file transfer must move per timeout: 1 MiB.
    public static let bytesPerTimeout: Int64 = CloudStore.fileBytesPerTimeout

    /// A request; every field can be changed afterwards.
    public init(
        method: HTTPMethod, url: URL, headers: HTTPHeaders = [:], body: Data = Data(), uploadFile: URL? = nil,
        downloadFile: URL? = nil, isRetrySafe: Bool = false, deadlineMilliseconds: Int64? = nil,
        transferBytes: Int64? = nil
    ) {
        self.transferBytes = transferBytes
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.uploadFile = uploadFile
        self.downloadFile = downloadFile
        self.isRetrySafe = isRetrySafe
        self.deadlineMilliseconds = deadlineMilliseconds
    }

    /// Whether the retry layer may send this request again.
    public var mayRetry: Bool { method.isIdempotent || isRetrySafe }

    /// The bytes the body sends: the upload file's size or the in-memory body's.
    public var bodySize: Int {
        if let uploadFile {
            let size = try? FileManager.default.attributesOfItem(atPath: uploadFile.path)[.size] as? NSNumber
            return size?.intValue ?? 0
        }
        return body.count
    }

    /// `METHOD url` with every credential in the URL redacted; never the headers or body.
    public var description: String { "\(method) \(HTTPRedaction.redact(url))" }
}

/// One HTTP answer.
public struct HTTPResponse: Sendable, Equatable, CustomStringConvertible {
    /// The status code (200, 404, ...).
    public var status: Int
    /// The header fields.
    public var headers: HTTPHeaders
    /// The body, unless it went to the request's ``HTTPRequest/downloadFile``.
    public var body: Data
    /// Where the body was written when the request asked for a file.
    public var bodyFile: URL?

    /// An answer; every field can be changed afterwards.
    public init(status: Int, headers: HTTPHeaders = [:], body: Data = Data(), bodyFile: URL? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyFile = bodyFile
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The bytes received: the downloaded file's size or the in-memory body's.
    public var bodySize: Int {
        if let bodyFile {
            let size = try? FileManager.default.attributesOfItem(atPath: bodyFile.path)[.size] as? NSNumber
            return size?.intValue ?? 0
        }
        return body.count
    }

    /// `HTTP status, N bytes`; never the headers (`Set-Cookie`) or body.
    public var description: String { "HTTP \(status), \(bodySize) bytes" }
}
