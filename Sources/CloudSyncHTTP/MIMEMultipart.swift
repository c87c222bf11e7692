import Foundation

/// MIME multipart bodies (RFC 2046) as Google's APIs use them: `multipart/related` uploads and `multipart/mixed`
/// batches, split into parts and built from them.
public enum MIMEMultipart {
    /// One part: its headers and its body.
    public struct Part: Sendable {
        /// The part's header fields.
        public var headers: HTTPHeaders
        /// The bytes after the part's blank line.
        public var body: Data

        /// A part.
        public init(headers: HTTPHeaders, body: Data) {
            self.headers = headers
            self.body = body
        }
    }

    /// The parts of `body` by the boundary in `contentType`; nil when there is none or no part.
    public static func parse(_ body: Data, contentType: String?) -> [Part]? {
        guard let contentType, let boundary = boundary(of: contentType) else { return nil }
        let delimiter = Array("--\(boundary)".utf8)
        let bytes = Array(body)
        var positions: [Int] = []
        var index = 0
        while index + delimiter.count <= bytes.count {
            if bytes[index] == delimiter[0], Array(bytes[index..<index + delimiter.count]) == delimiter,
                index == 0 || bytes[index - 1] == 0x0A
            {
                positions.append(index)
                index += delimiter.count
            } else {
                index += 1
            }
        }
        var parts: [Part] = []
        for (number, start) in positions.enumerated() {
            var from = start + delimiter.count
            if from + 1 < bytes.count, bytes[from] == 0x2D, bytes[from + 1] == 0x2D { break }
            while from < bytes.count, bytes[from] == 0x20 || bytes[from] == 0x09 { from += 1 }
            if from < bytes.count, bytes[from] == 0x0D { from += 1 }
            if from < bytes.count, bytes[from] == 0x0A { from += 1 }
            guard number + 1 < positions.count else { return nil }
            var end = positions[number + 1]
            if end > from, bytes[end - 1] == 0x0A { end -= 1 }
            if end > from, bytes[end - 1] == 0x0D { end -= 1 }
            guard let head = splitHead(Data(bytes[from..<max(from, end)])) else { return nil }
            parts.append(Part(headers: headers(head.lines), body: head.body))
        }
        return parts.isEmpty ? nil : parts
    }

    /// The `boundary` parameter of a content type, quotes removed.
    public static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else {
                continue
            }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// Header lines up to the first empty line, and the bytes after it; CRLF or LF line ends.
    public static func splitHead(_ data: Data) -> (lines: [String], body: Data)? {
        let bytes = Array(data)
        var lines: [String] = []
        var lineStart = 0
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0A {
                var lineEnd = index
                if lineEnd > lineStart, bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let line = String(decoding: bytes[lineStart..<lineEnd], as: UTF8.self)
                if line.isEmpty { return (lines, Data(bytes[(index + 1)...])) }
                lines.append(line)
                lineStart = index + 1
            }
            index += 1
        }
        if lineStart < bytes.count { lines.append(String(decoding: bytes[lineStart...], as: UTF8.self)) }
        return (lines, Data())
    }

    /// Header fields from `Name: value` lines.
    public static func headers(_ lines: [String]) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(
                String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        return headers
    }
}

extension MIMEMultipart {
    /// A body of `parts` between `--boundary` lines, closed by `--boundary--`, CRLF line ends.
    public static func build(_ parts: [Part], boundary: String) -> Data {
        var body = Data()
        for part in parts {
            body += Data("--\(boundary)\r\n".utf8)
            for field in part.headers { body += Data("\(field.name): \(field.value)\r\n".utf8) }
            body += Data("\r\n".utf8) + part.body + Data("\r\n".utf8)
        }
        body += Data("--\(boundary)--\r\n".utf8)
        return body
    }

    /// A random boundary that cannot occur in base64 or JSON text by chance.
    public static func randomBoundary() -> String {
        "cloudsync_" + (0..<24).map { _ in String("abcdefghijklmnopqrstuvwxyz0123456789".randomElement()!) }.joined()
    }
}
