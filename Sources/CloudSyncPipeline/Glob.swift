import CloudSync

/// A key pattern, as jobs' `keys` take them.
///
/// `*` matches any run of characters (none included), `?` any one character, `[abc]` one of those characters,
/// `[a-z]` one in that range, `[!a-z]` or `[^a-z]` one outside it; `\` makes the next character match itself.
/// Everything else matches itself. A character here is a Unicode scalar (a code point), as in rclone's and Go's
/// globs: keys are bytes, so `café` precomposed matches only the precomposed key, and a decomposed `é` is two
/// characters. Patterns are checked when a pipeline loads, so a malformed one is an error
/// there rather than a filter that silently matches nothing.
struct Glob: Sendable {
    private enum Element: Sendable {
        case literal(Unicode.Scalar)
        case any
        case anyRun
        case set(negated: Bool, items: [ClosedRange<Unicode.Scalar>])
    }

    private let elements: [Element]

    /// Why a pattern cannot be read.
    struct SyntaxError: Error { let message: String }

    init(_ pattern: String) throws(SyntaxError) {
        var elements: [Element] = []
        var characters = pattern.unicodeScalars.makeIterator()
        while let character = characters.next() {
            switch character {
            case "*": elements.append(.anyRun)
            case "?": elements.append(.any)
            case "\\":
                guard let escaped = characters.next() else {
                    throw SyntaxError(message: "\"\(pattern)\" ends with a lone \\; write \\\\ for a backslash")
                }
                elements.append(.literal(escaped))
            case "[":
                // The class body up to its closing ]; a ] first in the body (after any !/^) is a member.
                var body: [Unicode.Scalar] = []
                var negated = false
                var closed = false
                while let next = characters.next() {
                    if body.isEmpty, !negated, next == "!" || next == "^" {
                        negated = true
                    } else if next == "]", !body.isEmpty {
                        closed = true
                        break
                    } else {
                        body.append(next)
                    }
                }
                guard closed else {
                    throw SyntaxError(
                        message: "\"\(pattern)\" opens a [ class it never closes; close it with ], or write \\[ for a "
                            + "literal [")
                }
                var items: [ClosedRange<Unicode.Scalar>] = []
                var index = 0
                while index < body.count {
                    if index + 2 < body.count, body[index + 1] == "-" {
                        guard body[index] <= body[index + 2] else {
                            throw SyntaxError(
                                message: "\"\(pattern)\" has the range \(body[index])-\(body[index + 2]), which runs "
                                    + "backwards")
                        }
                        items.append(body[index]...body[index + 2])
                        index += 3
                    } else {
                        items.append(body[index]...body[index])
                        index += 1
                    }
                }
                elements.append(.set(negated: negated, items: items))
            default:
                elements.append(.literal(character))
            }
        }
        self.elements = elements
    }

    /// Whether `text` matches the whole pattern.
    func matches(_ text: String) -> Bool {
        let text = Array(text.unicodeScalars)
        var p = 0
        var t = 0
        var star = -1
        var mark = 0
        while t < text.count {
            if p < elements.count, Self.matches(elements[p], text[t]) {
                p += 1
                t += 1
            } else if p < elements.count, case .anyRun = elements[p] {
                star = p
                mark = t
                p += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < elements.count, case .anyRun = elements[p] { p += 1 }
        return p == elements.count
    }

    /// The characters every match starts with: the pattern's literal characters before its first `*`, `?` or class.
    var literalPrefix: String {
        var prefix = String.UnicodeScalarView()
        for element in elements {
            guard case .literal(let character) = element else { break }
            prefix.append(character)
        }
        return String(prefix)
    }

    private static func matches(_ element: Element, _ character: Unicode.Scalar) -> Bool {
        switch element {
        case .literal(let literal): return literal == character
        case .any: return true
        case .anyRun: return false
        case .set(let negated, let items): return items.contains { $0.contains(character) } != negated
        }
    }
}

/// Whether `text` matches the glob `pattern` (see ``Glob``); a malformed pattern matches nothing (the loader refuses
/// those in pipeline files).
package func globMatches(_ pattern: String, _ text: String) -> Bool {
    (try? Glob(pattern))?.matches(text) ?? false
}

/// The keys that can match any of `keys` (globs), as a range a listing in key order can start and stop at.
///
/// It runs after the patterns' common literal prefix less its last character, through that prefix with its last
/// character made the next one. Every key the patterns match falls in it (it may hold others, which the filter leaves
/// out); `.all` for no patterns, or when they share no literal prefix.
package func keyRange(of keys: [String]?) -> KeyRange {
    guard let keys, let first = keys.first else { return .all }
    var common = Array(((try? Glob(first))?.literalPrefix ?? "").unicodeScalars)
    for pattern in keys.dropFirst() {
        let prefix = Array(((try? Glob(pattern))?.literalPrefix ?? "").unicodeScalars)
        common = Array(zip(common, prefix).prefix { $0.0 == $0.1 }.map(\.0))
    }
    guard !common.isEmpty else { return .all }
    var after = String.UnicodeScalarView()
    after.append(contentsOf: common.dropLast())
    // The next string past every one that starts with `common`: its last character raised by one, carrying past
    // the largest.
    var through = common
    while let last = through.popLast() {
        var next = last.value + 1
        if next == 0xD800 { next = 0xE000 }
        if let raised = Unicode.Scalar(next) {
            through.append(raised)
            break
        }
    }
    var upper = String.UnicodeScalarView()
    upper.append(contentsOf: through)
    return KeyRange(after: String(after), through: through.isEmpty ? nil : String(upper))
}

/// A job's key selection: globs and exact keys, any of which may match.
package func keyFilter(_ keys: [String]?) -> (@Sendable (String) -> Bool)? {
    guard let keys else { return nil }
    return { key in keys.contains { globMatches($0, key) } }
}
