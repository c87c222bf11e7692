import CloudSyncHTTP
import Foundation

/// A method and a path of literal segments and `{name}` captures, written `GET /drive/v3/files/{id}`.
///
/// A last segment `{name...}` captures the rest of the path, slashes included (S3 object keys). Patterns are also the
/// names fault plans and the request log use for routes, so they encode as that text.
public struct HTTPRoutePattern: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// One path segment of a pattern.
    public enum Segment: Sendable, Hashable {
        /// Matches exactly this text (compared before percent-decoding).
        case literal(String)
        /// Matches any one non-empty segment and records it, decoded, under this name.
        case capture(String)
        /// Matches the rest of the path (one segment or more) and records it, decoded, under this name.
        case rest(String)
    }

    /// Why a pattern's text was refused.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The text that was refused.
        public let text: String
        /// What is wrong with it.
        public let reason: String
        /// `route pattern "...": reason`.
        public var description: String { "route pattern \"\(text)\": \(reason)" }
    }

    /// The method in upper case.
    public let method: String
    /// The path's segments, in order.
    public let segments: [Segment]

    /// Parses `METHOD /path/{capture}`; throws when the method or a segment is malformed.
    public init(parsing text: String) throws(ParseError) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else {
            throw ParseError(text: text, reason: "expected a method, one space and a path")
        }
        let method = String(parts[0])
        guard method.allSatisfy({ $0.isLetter && $0.isASCII }) else {
            throw ParseError(text: text, reason: "the method must be ASCII letters")
        }
        let path = parts[1]
        guard path.hasPrefix("/") else { throw ParseError(text: text, reason: "the path must start with /") }
        var segments: [Segment] = []
        let pieces = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, piece) in pieces.enumerated() {
            if piece.hasPrefix("{") && piece.hasSuffix("}") {
                var name = piece.dropFirst().dropLast()
                let isRest = name.hasSuffix("...")
                if isRest { name = name.dropLast(3) }
                guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw ParseError(text: text, reason: "capture \"\(piece)\" needs a name of letters, digits or _")
                }
                if isRest && index != pieces.count - 1 {
                    throw ParseError(text: text, reason: "\"\(piece)\" must be the last segment")
                }
                segments.append(isRest ? .rest(String(name)) : .capture(String(name)))
            } else if piece.contains("{") || piece.contains("}") {
                throw ParseError(text: text, reason: "segment \"\(piece)\" mixes text and a capture")
            } else {
                segments.append(.literal(String(piece)))
            }
        }
        self.method = method.uppercased()
        self.segments = segments
    }

    /// Parses a literal pattern; a malformed one stops the program, as it is a mistake in the test itself.
    public init(stringLiteral value: String) {
        do {
            try self.init(parsing: value)
        } catch {
            preconditionFailure(error.description)
        }
    }

    /// Decodes the pattern's text.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(parsing: text)
        } catch {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: error.description))
        }
    }

    /// Encodes the pattern as its text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// The pattern as written: `GET /drive/v3/files/{id}`.
    public var description: String {
        let path = segments.map { segment in
            switch segment {
            case .literal(let text): text
            case .capture(let name): "{\(name)}"
            case .rest(let name): "{\(name)...}"
            }
        }
        return "\(method) /\(path.joined(separator: "/"))"
    }

    /// The captures when `path` (still percent-encoded, no query) matches, or nil; the method is not checked.
    func match(path: String) -> [String: String]? {
        guard path.hasPrefix("/") else { return nil }
        let pieces = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        var captures: [String: String] = [:]
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .literal(let text):
                guard index < pieces.count, pieces[index] == text else { return nil }
            case .capture(let name):
                guard index < pieces.count, !pieces[index].isEmpty else { return nil }
                captures[name] = decode(pieces[index])
            case .rest(let name):
                guard index < pieces.count else { return nil }
                let rest = pieces[index...].joined(separator: "/")
                guard !rest.isEmpty else { return nil }
                captures[name] = decode(Substring(rest))
                return captures
            }
        }
        return pieces.count == segments.count ? captures : nil
    }

    private func decode(_ text: Substring) -> String {
        String(text).removingPercentEncoding ?? String(text)
    }
}

/// What answers a request: it runs on the connection's own thread, so it may block, but briefly.
public typealias HTTPHandler = @Sendable (ReceivedRequest) -> HTTPResponse
