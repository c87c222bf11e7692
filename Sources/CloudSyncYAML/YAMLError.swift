/// A YAML document that could not be turned into a node tree, with where and why.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem stopped parsing, for callers to branch on (the message is for people).
    public enum Kind: String, Sendable {
        /// libyaml rejected the text (its scanner or parser).
        case syntax
        /// The bytes are not valid UTF-8 (or another encoding libyaml rejects).
        case encoding
        /// A mapping repeats a key.
        case duplicateKey
        /// An alias names an anchor that was not defined before it.
        case undefinedAlias
        /// Expanding aliases (or the document itself) would exceed the node budget.
        case tooManyNodes
        /// Collections nest deeper than allowed.
        case tooDeep
        /// The stream holds more than one document.
        case multipleDocuments
    }

    /// What kind of problem it is.
    public let kind: Kind
    /// What is wrong, for people, without the location.
    public let message: String
    /// Where in the source the problem is.
    public let mark: YAMLMark

    /// An error of `kind` at `mark`, saying `message`.
    public init(_ kind: Kind, _ message: String, at mark: YAMLMark) {
        self.kind = kind
        self.message = message
        self.mark = mark
    }

    /// `line:column: message`.
    public var description: String { "\(mark): \(message)" }

    /// The error as a compiler prints it: `file:line:col: error: message`, then the source line and a caret
    /// under the column.
    public func rendered(file: String, source: String) -> String {
        Self.render(message, at: mark, file: file, source: source)
    }

    /// Renders any message about `source` the way a compiler does, for errors found after parsing too.
    public static func render(
        _ message: String, at mark: YAMLMark, file: String, source: String, severity: String = "error"
    ) -> String {
        var text = "\(file):\(mark.line):\(mark.column): \(severity): \(message)"
        guard let line = line(mark.line, of: source) else { return text }
        // Keep tabs in the caret's indentation so it lines up under the same character however tabs render.
        let indentation = line.prefix(max(0, mark.column - 1)).map { $0 == "\t" ? "\t" : " " }.joined()
        text += "\n\(line)\n\(indentation)^"
        return text
    }

    private static func line(_ number: Int, of source: String) -> Substring? {
        guard number >= 1 else { return nil }
        var current = 1
        var start = source.startIndex
        while current < number {
            // "\r\n" is a single Character in Swift, so it has to be named beside "\n".
            guard let newline = source[start...].firstIndex(where: { $0 == "\n" || $0 == "\r\n" }) else {
                return nil
            }
            start = source.index(after: newline)
            current += 1
        }
        let end = source[start...].firstIndex { $0 == "\n" || $0 == "\r\n" || $0 == "\r" } ?? source.endIndex
        return source[start..<end]
    }
}
