import CloudSyncHTTP
import Foundation

/// How much of a request a server takes before it has decided to answer it: the most bytes of a head (request line
/// and header fields) and of a body.
///
/// Both servers screen a request's head against these limits before reading any body byte, so a client
/// can never make them hold more than these bounds per connection, whatever it declares or sends.
public struct HTTPRequestLimits: Sendable, Equatable {
    /// The most bytes of a request head; a longer one gets 431.
    public var headBytes: Int
    /// The most bytes of a body, declared or sent; a longer one gets 413 (a chunked one that grows past it ends its
    /// connection).
    public var bodyBytes: Int

    public init(headBytes: Int, bodyBytes: Int) {
        self.headBytes = headBytes
        self.bodyBytes = bodyBytes
    }

    /// `cloudsync serve`'s: no endpoint takes more than a small JSON body.
    public static let service = HTTPRequestLimits(headBytes: 16 * 1024, bodyBytes: 64 * 1024)
    /// The loopback server's: the emulators take uploads of files (6 MiB in the suite), the heads stay small.
    public static let loopback = HTTPRequestLimits(headBytes: 16 * 1024, bodyBytes: 64 * 1024 * 1024)

    /// The refusal a request earns by its head alone, or nil when its body (if any) may be read.
    ///
    /// Refused: a head over ``headBytes`` (431); `Content-Length` beside `Transfer-Encoding` (400, RFC 9112 §6.3:
    /// the two disagree on where the body ends, the root of request smuggling); a transfer coding other than
    /// `chunked` alone (501); a `Content-Length` that is not one run of digits, or several that differ (400); a
    /// declared length over ``bodyBytes`` (413). Every refusal closes the connection.
    package func screen(headBytes count: Int, headers: HTTPHeaders) -> HTTPRequestRefusal? {
        if count > headBytes { return headTooLarge(count: count) }
        let codings = headers.values(for: "Transfer-Encoding")
        let lengths = headers.values(for: "Content-Length")
        if !codings.isEmpty {
            guard lengths.isEmpty else {
                return HTTPRequestRefusal(
                    status: 400, code: "ERR_BAD_REQUEST",
                    message: "the request has both Content-Length and Transfer-Encoding; send one of them")
            }
            let names = codings.joined(separator: ",").split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            }
            guard names == ["chunked"] else {
                return HTTPRequestRefusal(
                    status: 501, code: "ERR_NOT_IMPLEMENTED",
                    message: "the transfer coding '\(codings.joined(separator: ", "))' is not supported; "
                        + "send Content-Length or Transfer-Encoding: chunked")
            }
            return nil
        }
        guard let first = lengths.first else { return nil }
        // A list (`5, 5`) is one length said twice; anything but digits is refused, `+5` and `-0` included.
        let values = lengths.joined(separator: ",").split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard values.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } }),
            Set(values).count == 1
        else {
            return HTTPRequestRefusal(
                status: 400, code: "ERR_BAD_REQUEST", message: "the Content-Length '\(first)' is not one whole number")
        }
        // More digits than any allowed length has are too large, whatever they say: no integer is formed from them.
        let digits = values[0].drop { $0 == "0" }
        if digits.count > String(bodyBytes).count || Int(digits).map({ $0 > bodyBytes }) ?? false {
            return bodyTooLarge(declared: String(digits.isEmpty ? "0" : digits))
        }
        return nil
    }

    /// The refusal of a head over ``headBytes``: `count` bytes long, or nil for one that had not ended at the limit.
    package func headTooLarge(count: Int?) -> HTTPRequestRefusal {
        HTTPRequestRefusal(
            status: 431, code: "ERR_HEAD_TOO_LARGE",
            message: "the request head is \(count.map(String.init) ?? "over \(headBytes)") bytes; this server takes at "
                + "most \(headBytes)")
    }

    /// The refusal of a body over ``bodyBytes``: `declared` is the length the head gave, nil for a chunked body that
    /// grew past the limit.
    package func bodyTooLarge(declared: String?) -> HTTPRequestRefusal {
        HTTPRequestRefusal(
            status: 413, code: "ERR_BODY_TOO_LARGE",
            message: (declared.map { "the request body is \($0) bytes" }
                ?? "the chunked request body grew past \(bodyBytes) bytes")
                + "; this server takes at most \(bodyBytes)")
    }
}

/// Why a server answered a request itself, before any handler saw it: the status, a stable code and what to do.
public struct HTTPRequestRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status it is answered with (400, 413, 431, 501, 503).
    public var status: Int
    /// `ERR_HEAD_TOO_LARGE`, `ERR_BODY_TOO_LARGE`, `ERR_BAD_REQUEST`, `ERR_NOT_IMPLEMENTED`, `ERR_OVERLOADED` or
    /// `ERR_STOPPING`.
    public var code: String
    /// What was wrong, for a person.
    public var message: String

    public init(status: Int, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(status) \(code): \(message)" }
}
