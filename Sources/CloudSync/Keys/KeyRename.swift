/// A rename of keys by pattern: `from` is text with `*` wildcards, each capturing the run of characters it matches
/// (none included), and `to` is text naming those captures `{1}`, `{2}`, … in any order.
///
/// `settings.*` → `prefs.{1}` renames `settings.theme` to `prefs.theme`; `*/*` → `{2}/{1}` swaps two parts. A key
/// `from` does not match keeps its name. In either pattern `\` makes the next character itself (`\*`, `\{`).
///
/// A rename never maps two keys onto one. A pattern that could is refused when it is made: `to` must name every
/// capture exactly once, and two captures may not touch (in `from`, `**`; in `to`, `{1}{2}`), since a run could then
/// be split between them in more than one way. What is left is checked key by key: ``target(of:)`` renames a key and
/// reads the result back through `to` and `from`, and a key that does not come back as itself (`prefs.theme` kept
/// under its name while `settings.theme` becomes `prefs.theme` too) has no target. Since reading back is a function,
/// two keys that both come back have different targets.
public struct KeyRename: Sendable, Equatable, CustomStringConvertible {
    /// The pattern as written.
    public let from: String
    /// The target as written.
    public let to: String
    /// `from`'s literal runs around its captures: one more than there are captures.
    private let sourceParts: [String]
    /// `to`'s literal runs around its captures, and which capture each of its slots names (0-based), in order.
    private let targetParts: [String]
    private let targetSlots: [Int]

    /// Why a rename's patterns were refused, for a person.
    public struct Problem: Error, Sendable, Equatable {
        /// What is wrong and what to write instead.
        public let message: String
    }

    /// The rename of keys matching `from` to `to`; refused when either is malformed or the rename could map two keys
    /// onto one.
    public init(from: String, to: String) throws(Problem) {
        self.from = from
        self.to = to
        sourceParts = try Self.sourceParts(of: from)
        (targetParts, targetSlots) = try Self.targetParts(of: to, captures: sourceParts.count - 1, from: from)
    }

    public var description: String { "\(from) -> \(to)" }

    /// Whether `key` matches `from`, so the rename gives it a new name (a key it does not match keeps its own).
    public func matches(_ key: String) -> Bool { Self.captures(of: key, in: sourceParts) != nil }

    /// The name `key` takes: `to` filled with its captures when it matches `from`, else `key` itself; nil when the
    /// name could be another key's too (reading it back through the rename does not give `key`).
    public func target(of key: String) -> String? {
        let target = Self.captures(of: key, in: sourceParts).map {
            Self.fill(targetParts, slots: targetSlots, with: $0)
        }
        let named = target ?? key
        // By bytes, as keys are compared everywhere: two spellings of one text are two keys.
        return StoreKey(source(of: named)) == StoreKey(key) ? named : nil
    }

    /// The key that takes the name `name`: `from` filled with the captures `name` gives `to`, or `name` itself when
    /// it does not match `to`.
    public func source(of name: String) -> String {
        guard let found = Self.captures(of: name, in: targetParts) else { return name }
        var captures = [String](repeating: "", count: targetSlots.count)
        for (slot, capture) in zip(targetSlots, found) { captures[slot] = capture }
        return Self.fill(sourceParts, slots: Array(captures.indices), with: captures)
    }

    /// `parts` with `captures[slots[i]]` between parts i and i+1.
    private static func fill(_ parts: [String], slots: [Int], with captures: [String]) -> String {
        var text = parts[0]
        for (index, slot) in slots.enumerated() { text += captures[slot] + parts[index + 1] }
        return text
    }

    /// The runs `text` gives the wildcards between `parts` (each literal found at its first place after the one
    /// before, so the split is the same every time); nil when `text` does not match.
    private static func captures(of text: String, in parts: [String]) -> [String]? {
        let scalars = Array(text.unicodeScalars)
        let literals = parts.map { Array($0.unicodeScalars) }
        guard scalars.starts(with: literals[0]) else { return nil }
        if literals.count == 1 { return scalars.count == literals[0].count ? [] : nil }
        let last = literals[literals.count - 1]
        guard scalars.count >= literals[0].count + last.count, scalars.suffix(last.count).elementsEqual(last) else {
            return nil
        }
        let end = scalars.count - last.count
        var position = literals[0].count
        var captures: [String] = []
        for literal in literals.dropFirst().dropLast() {
            guard let found = firstIndex(of: literal, in: scalars, from: position, before: end) else { return nil }
            captures.append(String(String.UnicodeScalarView(scalars[position..<found])))
            position = found + literal.count
        }
        captures.append(String(String.UnicodeScalarView(scalars[position..<end])))
        return captures
    }

    private static func firstIndex(
        of literal: [Unicode.Scalar], in scalars: [Unicode.Scalar], from start: Int, before end: Int
    ) -> Int? {
        var index = start
        while index + literal.count <= end {
            if scalars[index..<(index + literal.count)].elementsEqual(literal) { return index }
            index += 1
        }
        return nil
    }

    /// The character a `\` makes itself: the next one, which a pattern must have.
    private static func escaped(after characters: inout String.UnicodeScalarView.Iterator, in pattern: String)
        throws(Problem) -> Unicode.Scalar
    {
        guard let escaped = characters.next() else {
            throw Problem(message: "\"\(pattern)\" ends with a lone \\; write \\\\ for a backslash")
        }
        return escaped
    }

    private static func sourceParts(of pattern: String) throws(Problem) -> [String] {
        var parts = [""]
        var characters = pattern.unicodeScalars.makeIterator()
        var previousWasCapture = false
        while let character = characters.next() {
            switch character {
            case "*":
                guard !previousWasCapture else {
                    throw Problem(
                        message:
                            "\"\(pattern)\" has two * side by side, which could split a key's run in more than one "
                            + "way; put text between them")
                }
                parts.append("")
                previousWasCapture = true
                continue
            case "\\":
                parts[parts.count - 1].unicodeScalars.append(try escaped(after: &characters, in: pattern))
            case "?", "[":
                throw Problem(
                    message: "\"\(pattern)\" uses \(character), but a rename's `from` takes only * (each a capture); "
                        + "write \\\(character) for the character itself, or select keys with the job's `keys`")
            default:
                parts[parts.count - 1].unicodeScalars.append(character)
            }
            previousWasCapture = false
        }
        return parts
    }

    private static func targetParts(of pattern: String, captures: Int, from: String) throws(Problem)
        -> (parts: [String], slots: [Int])
    {
        var parts = [""]
        var slots: [Int] = []
        var characters = pattern.unicodeScalars.makeIterator()
        var previousWasCapture = false
        while let character = characters.next() {
            switch character {
            case "{":
                var digits = ""
                var closed = false
                while let next = characters.next() {
                    if next == "}" {
                        closed = true
                        break
                    }
                    digits.unicodeScalars.append(next)
                }
                guard closed, let number = Int(digits), (1...max(captures, 1)).contains(number), captures > 0 else {
                    throw Problem(
                        message: "\"\(pattern)\" names {\(digits)}, but \"\(from)\" has \(captures) capture"
                            + (captures == 1 ? "" : "s") + " ({1} to {\(captures)}); write \\{ for a literal {")
                }
                guard !previousWasCapture else {
                    throw Problem(
                        message: "\"\(pattern)\" puts two captures side by side, so different keys could take one "
                            + "name; put text between them")
                }
                slots.append(number - 1)
                parts.append("")
                previousWasCapture = true
                continue
            case "\\":
                parts[parts.count - 1].unicodeScalars.append(try escaped(after: &characters, in: pattern))
            default:
                parts[parts.count - 1].unicodeScalars.append(character)
            }
            previousWasCapture = false
        }
        for capture in 0..<captures where slots.filter({ $0 == capture }).count != 1 {
            let uses = slots.filter { $0 == capture }.count
            throw Problem(
                message: uses == 0
                    ? "\"\(pattern)\" drops capture {\(capture + 1)} of \"\(from)\", so keys differing only there would "
                        + "take one name; use every capture once"
                    : "\"\(pattern)\" uses capture {\(capture + 1)} \(uses) times; use every capture once")
        }
        return (parts, slots)
    }
}
