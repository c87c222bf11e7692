import CloudSyncHTTP
import Foundation
import Glibc

/// A request read off a connection, and whether the connection may carry another.
struct ParsedRequest {
    var request: ReceivedRequest
    var keepAlive: Bool
}

/// The outcome of reading one request.
enum ReadResult {
    /// The peer closed (or reset) the connection, cleanly between requests or not.
    case closed
    /// The bytes were not HTTP/1.x; answer 400 and close.
    case malformed(String)
    /// A whole request, body included.
    case request(ParsedRequest)
}

/// One accepted socket, read and written by its own thread only; keeps bytes read past a request for the next one.
///
/// With a ``TLSStream`` (its handshake done) the bytes go through it; the HTTP above is the same either way.
final class SocketConnection {
    private static let headLimit = 64 * 1024

    private let fd: Int32
    private let tls: TLSStream?
    private var buffer: [UInt8] = []
    private var start = 0
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32, tls: TLSStream? = nil) {
        self.fd = fd
        self.tls = tls
    }

    /// Sends every byte (encrypted, over TLS); false when the peer is gone.
    func send(_ bytes: [UInt8]) -> Bool {
        if let tls { return tls.write(bytes) }
        return sendAll(fd, bytes[...])
    }

    /// Reads and discards until the peer closes or the server shuts the socket down: how a hung request waits.
    func drainUntilClosed() {
        while fill() {
            start = buffer.count
        }
    }

    /// Reads one request: head, then the body by `Content-Length` or chunks, answering `Expect: 100-continue` first.
    func readRequest() -> ReadResult {
        guard let head = readUntil(crlfcrlf, limit: Self.headLimit) else {
            return buffer.count - start >= Self.headLimit ? .malformed("request head over 64 KiB") : .closed
        }
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
            return .malformed("bad request line")
        }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .malformed("bad header line") }
            headers.add(
                String(line[..<colon]),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let method = String(requestLine[0])
        let target = requestLine[1]
        // RFC 9112 §3.2.2: a server must accept the absolute form (what clients send to a proxy); the route is
        // its path, and an empty path is "/".
        var originForm = target
        if let scheme = target.range(of: "://"), target[..<scheme.lowerBound].allSatisfy(\.isLetter) {
            let afterAuthority = target[scheme.upperBound...].drop { $0 != "/" && $0 != "?" }
            originForm = afterAuthority.hasPrefix("/") ? afterAuthority : Substring("/" + afterAuthority)
        }
        let path: Substring
        var queryItems: [URLQueryItem] = []
        if let question = originForm.firstIndex(of: "?") {
            path = originForm[..<question]
            queryItems = decodeQuery(originForm[originForm.index(after: question)...])
        } else {
            path = originForm
        }

        let connectionTokens = headers.values(for: "Connection").joined(separator: ",").lowercased()
        let keepAlive =
            requestLine[2] == "HTTP/1.0"
            ? connectionTokens.contains("keep-alive") : !connectionTokens.contains("close")
        let chunked = headers.values(for: "Transfer-Encoding").joined(separator: ",").lowercased().contains("chunked")
        var length = 0
        if !chunked, let text = headers["Content-Length"] {
            guard let value = Int(text), value >= 0 else { return .malformed("bad Content-Length") }
            length = value
        }
        if headers["Expect"]?.lowercased() == "100-continue" && (chunked || length > 0) {
            guard send(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return .closed }
        }

        let body: [UInt8]
        if chunked {
            switch readChunkedBody() {
            case .none: return .closed
            case .some(.failure(let failure)): return .malformed(failure.reason)
            case .some(.success(let bytes)): body = bytes
            }
        } else {
            guard let bytes = read(count: length) else { return .closed }
            body = bytes
        }
        var request = ReceivedRequest(
            method: method, path: String(path), target: String(target), queryItems: queryItems, headers: headers,
            body: Data(body))
        if let question = target.firstIndex(of: "?") {
            request.rawQuery = String(target[target.index(after: question)...])
        }
        return .request(ParsedRequest(request: request, keepAlive: keepAlive))
    }

    /// The decoded body, a failure for bad framing, or nil when the peer closed first.
    private func readChunkedBody() -> Result<[UInt8], ParseFailure>? {
        var body: [UInt8] = []
        while true {
            guard let line = readUntil(crlf, limit: 1024) else { return nil }
            let sizeText = String(decoding: line, as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16), size >= 0 else {
                return .failure(ParseFailure("bad chunk size"))
            }
            if size == 0 {
                // Trailer fields, if any, up to the empty line.
                while true {
                    guard let trailer = readUntil(crlf, limit: Self.headLimit) else { return nil }
                    if trailer.count == 2 { return .success(body) }
                }
            }
            guard let chunk = read(count: size + 2) else { return nil }
            guard chunk[size] == 13, chunk[size + 1] == 10 else { return .failure(ParseFailure("chunk without CRLF")) }
            body.append(contentsOf: chunk[..<size])
        }
    }

    /// Bytes up to and including `terminator`, or nil when the peer closes or `limit` bytes pass without it.
    private func readUntil(_ terminator: [UInt8], limit: Int) -> [UInt8]? {
        // Relative to `start`, which `fill()` may move when it compacts the buffer.
        var searched = 0
        while true {
            if buffer.count - start >= terminator.count {
                let last = buffer.count - terminator.count
                var index = start + searched
                while index <= last {
                    if buffer[index] == terminator[0]
                        && buffer[index..<index + terminator.count].elementsEqual(terminator)
                    {
                        let end = index + terminator.count
                        let bytes = Array(buffer[start..<end])
                        start = end
                        return bytes
                    }
                    index += 1
                }
                searched = last + 1 - start
            }
            if buffer.count - start >= limit { return nil }
            guard fill() else { return nil }
        }
    }

    private func read(count: Int) -> [UInt8]? {
        while buffer.count - start < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[start..<start + count])
        start += count
        return bytes
    }

    /// Reads what has arrived (blocking until something has); false at end of stream or on an error.
    private func fill() -> Bool {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 64 * 1024 {
            buffer.removeFirst(start)
            start = 0
        }
        while true {
            let count = scratch.withUnsafeMutableBytes { raw in
                if let tls { return tls.read(into: raw) }
                return recv(fd, raw.baseAddress!, raw.count, 0)
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer.append(contentsOf: scratch[..<count])
            return true
        }
    }
}

/// Sends every byte on `fd`, with `MSG_NOSIGNAL` so a vanished peer is an error here, not SIGPIPE for the process.
func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let count = bytes.withUnsafeBytes { raw in
            Glibc.send(fd, raw.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
        }
        if count < 0 {
            if errno == EINTR { continue }
            return false
        }
        sent += count
    }
    return true
}

/// Why a chunked body could not be read.
struct ParseFailure: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

private let crlf: [UInt8] = [13, 10]
private let crlfcrlf: [UInt8] = [13, 10, 13, 10]

/// `a=1&b=x%20y` as items, percent-decoded; an item without `=` has a nil value.
private func decodeQuery(_ query: Substring) -> [URLQueryItem] {
    query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        let value = parts.count > 1 ? String(parts[1]) : nil
        return URLQueryItem(
            name: name.removingPercentEncoding ?? name, value: value.map { $0.removingPercentEncoding ?? $0 })
    }
}
