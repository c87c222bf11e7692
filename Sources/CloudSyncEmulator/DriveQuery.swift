import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// The subset of Drive's search language clients of the app data folder use: terms joined by `and`.
struct DriveQuery {
    enum Term {
        case name(String, String)  // operator, value
        case trashed(Bool)
        case inParents(String)
    }

    struct ParseError: Error {}

    let terms: [Term]

    init(_ text: String) throws {
        var tokens = try Self.tokenize(text)
        var terms: [Term] = []
        while !tokens.isEmpty {
            if !terms.isEmpty {
                guard tokens.removeFirst().lowercased() == "and" else { throw ParseError() }
            }
            guard tokens.count >= 3 else { throw ParseError() }
            let (a, op, b) = (tokens[0], tokens[1], tokens[2])
            tokens.removeFirst(3)
            if a == "name", ["=", "!=", "contains"].contains(op), let value = Self.literal(b) {
                terms.append(.name(op, value))
            } else if a == "trashed", op == "=", b == "true" || b == "false" {
                terms.append(.trashed(b == "true"))
            } else if let value = Self.literal(a), op == "in", b == "parents" {
                terms.append(.inParents(value))
            } else {
                throw ParseError()
            }
        }
        self.terms = terms
    }

    func matches(_ file: DriveFilesEmulator.File) -> Bool {
        terms.allSatisfy { term in
            switch term {
            // Names compare as bytes, as Drive's do.
            case .name("=", let value): return StoreKey.bytesEqual(file.name, value)
            case .name("!=", let value): return !StoreKey.bytesEqual(file.name, value)
            case .name(_, let value): return file.name.utf8.starts(with: value.utf8)
            case .trashed(let trashed): return file.trashed == trashed
            case .inParents(let parent): return file.parents.contains(parent)
            }
        }
    }

    /// A quoted token's value with `\'` and `\\` unescaped; nil for an unquoted one.
    private static func literal(_ token: String) -> String? {
        guard token.hasPrefix("'"), token.hasSuffix("'"), token.count >= 2 else { return nil }
        var value = ""
        var escaped = false
        for character in token.dropFirst().dropLast() {
            if escaped {
                value.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                value.append(character)
            }
        }
        return value
    }

    private static func tokenize(_ text: String) throws -> [String] {
        var tokens: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        func flush() {
            if !current.isEmpty { tokens.append(current) }
            current = ""
        }
        for character in text {
            if quoted {
                current.append(character)
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "'" {
                    quoted = false
                    flush()
                }
            } else if character == "'" {
                flush()
                quoted = true
                current.append(character)
            } else if character == " " || character == "\t" || character == "\n" {
                flush()
            } else if character == "=" || character == "!" {
                if character == "=", current == "!" {
                    current = "!="
                    flush()
                } else {
                    flush()
                    current = String(character)
                    if character == "=" { flush() }
                }
            } else {
                if current == "!" { throw ParseError() }
                current.append(character)
            }
        }
        if quoted { throw ParseError() }
        flush()
        return tokens
    }
}
