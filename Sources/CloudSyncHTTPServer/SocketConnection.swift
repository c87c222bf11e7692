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
    /// The request was refused by its bytes alone (not HTTP/1.x, over a limit, ambiguous framing): answer it with
    /// the refusal's status and close.
    case refused(HTTPRequestRefusal)
    /// A whole request, body included.
    case request(ParsedRequest)
}

/// One accepted socket, read and written by its own thread only; keeps bytes read past a request for the next one.
///
/// With a ``TLSStream`` (its handshake done) the bytes go through it; the HTTP above is the same either way. Every
/// size a client sends is checked against ``HTTPRequestLimits`` before it is used, so no head, length or chunk size
/// can make it allocate past them or overflow.
final class SocketConnection {
    private let limits: HTTPRequestLimits
    private let receive: (UnsafeMutableRawBufferPointer) -> Int
    private let transmit: ([UInt8]) -> Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    convenience init(fd: Int32, tls: TLSStream? = nil, limits: HTTPRequestLimits) {
        self.init(
            limits: limits,
            receive: { raw in
                if let tls { return tls.read(into: raw) }
                return recv(fd, raw.baseAddress!, raw.count, 0)
            },
            transmit: { bytes in
                if let tls { return tls.write(bytes) }
                return sendAll(fd, bytes[...])
            })
    }

    /// A connection over any byte source; the fuzz entry point feeds it from memory.
    ///
    /// `receive` fills what it can and returns the count (0 at the end, -1 on an error), `transmit` sends and says
    /// whether the peer took it.
    init(
        limits: HTTPRequestLimits, receive: @escaping (UnsafeMutableRawBufferPointer) -> Int,
        transmit: @escaping ([UInt8]) -> Bool
    ) {
        self.limits = limits
        self.receive = receive
        self.transmit = transmit
    }

    /// Sends every byte (encrypted, over TLS); false when the peer is gone.
    func send(_ bytes: [UInt8]) -> Bool { transmit(bytes) }

    /// Reads and discards until the peer closes or the server shuts the socket down: how a hung request waits.
    func drainUntilClosed() {
        while fill() {
            start = buffer.count
        }
    }

    /// Reads one request: head, then the body by `Content-Length` or chunks, answering `Expect: 100-continue` first.
    ///
    /// The head is screened by ``HTTPRequestLimits/screen(headBytes:headers:)`` before any body byte is read.
    func readRequest() -> ReadResult {
        let head: [UInt8]
        switch readUntil(crlfcrlf, limit: limits.headBytes) {
        case .closed: return .closed
        case .tooLong: return .refused(limits.headTooLarge(count: nil))
        case .found(let bytes): head = bytes
        }
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else {
            return .refused(malformed("bad request line"))
        }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .refused(malformed("bad header line")) }
            headers.add(
                String(line[..<colon]),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        if let refusal = limits.screen(headBytes: head.count, headers: headers) { return .refused(refusal) }
        let method = String(requestLine[0])
        let target = String(requestLine[1])
        let connectionTokens = headers.values(for: "Connection").joined(separator: ",").lowercased()
        let keepAlive =
            requestLine[2] == "HTTP/1.0"
            ? connectionTokens.contains("keep-alive") : !connectionTokens.contains("close")
        let chunked = !headers.values(for: "Transfer-Encoding").isEmpty
        // The screen let only digits within the body limit through.
        let length =
            chunked ? 0 : headers["Content-Length"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        if headers["Expect"]?.lowercased() == "100-continue" && (chunked || length > 0) {
            guard send(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return .closed }
        }

        let body: [UInt8]
        if chunked {
            switch readChunkedBody() {
            case .none: return .closed
            case .some(.failure(let refusal)): return .refused(refusal)
            case .some(.success(let bytes)): body = bytes
            }
        } else {
            guard let bytes = read(count: length) else { return .closed }
            body = bytes
        }
        let request = ReceivedRequest(method: method, target: target, headers: headers, body: Data(body))
        return .request(ParsedRequest(request: request, keepAlive: keepAlive))
    }

    /// The decoded body, a refusal for bad framing or a body past the limit, or nil when the peer closed first.
    private func readChunkedBody() -> Result<[UInt8], HTTPRequestRefusal>? {
        var body: [UInt8] = []
        while true {
            let line: [UInt8]
            switch readUntil(crlf, limit: 1024) {
            case .closed: return nil
            case .tooLong: return .failure(malformed("chunk size line over 1024 bytes"))
            case .found(let bytes): line = bytes
            }
            let sizeField = (String(decoding: line, as: UTF8.self).split(separator: ";").first ?? "")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            // ASCII hex digits only (no sign, which Int(_:radix:) would take); leading zeros say nothing.
            guard !sizeField.isEmpty, sizeField.utf8.allSatisfy(isHexDigit) else {
                return .failure(malformed("bad chunk size"))
            }
            let digits = sizeField.drop { $0 == "0" }
            // Few enough digits that the size cannot overflow; then it must fit what the limit leaves.
            guard digits.utf8.count <= 15, let size = digits.isEmpty ? 0 : Int(digits, radix: 16),
                size <= limits.bodyBytes - body.count
            else { return .failure(limits.bodyTooLarge(declared: nil)) }
            if size == 0 {
                // Trailer fields, if any, up to the empty line; they count against the head limit.
                var trailerBytes = 0
                while true {
                    switch readUntil(crlf, limit: limits.headBytes - trailerBytes) {
                    case .closed: return nil
                    case .tooLong: return .failure(limits.headTooLarge(count: nil))
                    case .found(let trailer):
                        if trailer.count == 2 { return .success(body) }
                        trailerBytes += trailer.count
                    }
                }
            }
            guard let chunk = read(count: size + 2) else { return nil }
            guard chunk[size] == 13, chunk[size + 1] == 10 else { return .failure(malformed("chunk without CRLF")) }
            body.append(contentsOf: chunk[..<size])
        }
    }

    private func malformed(_ reason: String) -> HTTPRequestRefusal {
        HTTPRequestRefusal(status: 400, code: "ERR_BAD_REQUEST", message: reason)
    }

    /// What ``readUntil(_:limit:)`` found.
    private enum Delimited {
        /// The bytes up to and including the terminator.
        case found([UInt8])
        /// `limit` bytes came without it (or it came past them, in bytes that arrived together).
        case tooLong
        /// The peer closed first.
        case closed
    }

    /// Reads up to and including `terminator`, which must come within `limit` bytes.
    private func readUntil(_ terminator: [UInt8], limit: Int) -> Delimited {
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
                        guard end - start <= limit else { return .tooLong }
                        let bytes = Array(buffer[start..<end])
                        start = end
                        return .found(bytes)
                    }
                    index += 1
                }
                searched = last + 1 - start
            }
            if buffer.count - start >= limit { return .tooLong }
            guard fill() else { return .closed }
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
            let count = scratch.withUnsafeMutableBytes { receive($0) }
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

private let crlf: [UInt8] = [13, 10]

/// 0-9, A-F, a-f.
private func isHexDigit(_ byte: UInt8) -> Bool {
    (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte)
}
private let crlfcrlf: [UInt8] = [13, 10, 13, 10]

/// Every request `bytes` hold, read as a connection that receives them `pieceSize` bytes at a time would read them,
/// and the refusal that ended the connection, if one did; what it would have sent back is dropped.
///
/// The fuzz entry point drives the parser through it, and tests check framing without a socket.
package func readRequests(
    from bytes: [UInt8], pieceSize: Int = 4096, limits: HTTPRequestLimits = .loopback
) -> (requests: [ReceivedRequest], refusal: HTTPRequestRefusal?) {
    var offset = 0
    let connection = SocketConnection(
        limits: limits,
        receive: { raw in
            let count = min(raw.count, max(pieceSize, 1), bytes.count - offset)
            guard count > 0 else { return 0 }
            bytes.withUnsafeBytes { source in
                raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            offset += count
            return count
        },
        transmit: { _ in true })
    var requests: [ReceivedRequest] = []
    while true {
        switch connection.readRequest() {
        case .closed: return (requests, nil)
        case .refused(let refusal): return (requests, refusal)
        case .request(let parsed):
            requests.append(parsed.request)
            if !parsed.keepAlive { return (requests, nil) }
        }
    }
}
