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

/// A job's key selection: globs and exact keys, any of which may match.
package func keyFilter(_ keys: [String]?) -> (@Sendable (String) -> Bool)? {
    guard let keys else { return nil }
    return { key in keys.contains { globMatches($0, key) } }
}
