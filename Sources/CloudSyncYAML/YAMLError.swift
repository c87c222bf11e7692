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
    /// Whether libyaml stopped while parsing a `{ }` or `[ ]` collection (a brace or bracket of a value ended it
    /// early, the usual cause being an unquoted `${env:NAME}`).
    public let inFlowCollection: Bool

    /// An error of `kind` at `mark`, saying `message`.
    public init(_ kind: Kind, _ message: String, at mark: YAMLMark, inFlowCollection: Bool = false) {
        self.kind = kind
        self.message = message
        self.mark = mark
        self.inFlowCollection = inFlowCollection
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
        render(message, at: mark, file: file, lines: SourceLines(source), severity: severity)
    }

    /// Renders a message against source lines indexed once, so rendering many errors of one file stays linear.
    public static func render(
        _ message: String, at mark: YAMLMark, file: String, lines: SourceLines, severity: String = "error"
    ) -> String {
        var text = "\(file):\(mark.line):\(mark.column): \(severity): \(message)"
        guard let line = lines[mark.line] else { return text }
        // Keep tabs in the caret's indentation so it lines up under the same character however tabs render.
        let indentation = line.prefix(max(0, mark.column - 1)).map { $0 == "\t" ? "\t" : " " }.joined()
        text += "\n\(line)\n\(indentation)^"
        return text
    }
}

/// The lines of a source text, found in one pass, so looking up a line by its number costs nothing more.
public struct SourceLines: Sendable {
    private let source: String
    /// Where each line starts; line 1 starts at the text's start.
    private let starts: [String.Index]

    /// Indexes `source`'s lines; a line ends at "\n" or "\r\n" (a lone "\r" ends the shown text, not the line).
    public init(_ source: String) {
        self.source = source
        var starts = [source.startIndex]
        var index = source.startIndex
        // "\r\n" is a single Character in Swift, so it has to be named beside "\n".
        while let newline = source[index...].firstIndex(where: { $0 == "\n" || $0 == "\r\n" }) {
            index = source.index(after: newline)
            starts.append(index)
        }
        self.starts = starts
    }

    /// Line `number` (1-based) without its line ending; nil past the last line.
    public subscript(_ number: Int) -> Substring? {
        guard number >= 1, number <= starts.count else { return nil }
        let start = starts[number - 1]
        let end = source[start...].firstIndex { $0 == "\n" || $0 == "\r\n" || $0 == "\r" } ?? source.endIndex
        return source[start..<end]
    }
}
