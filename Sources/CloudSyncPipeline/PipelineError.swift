import CloudSyncYAML

/// One thing wrong with a pipeline file, where it is, and what to do.
public struct PipelineDiagnostic: Sendable, Equatable, CustomStringConvertible {
    /// The pipeline file's path, as given to the loader.
    public var file: String
    /// The 1-based line and column the diagnostic points at.
    public var mark: YAMLMark
    /// What is wrong and what to do, without the location (for example "unknown field `tierng`; did you mean
    /// tiering?").
    public var message: String
    /// Whether it stops the file from loading (an error) or is worth knowing (a warning).
    public var isWarning = false

    /// `file:line:col: error: message` (or `warning:`), one line without the source, as editors and `grep` read it.
    public var description: String {
        "\(file):\(mark.line):\(mark.column): \(isWarning ? "warning" : "error"): \(message)"
    }

    /// As a compiler prints it, with the source line and a caret.
    public func rendered(source: String) -> String {
        YAMLError.render(message, at: mark, file: file, source: source, severity: isWarning ? "warning" : "error")
    }
}

/// Every error of one pipeline file (all of them, not just the first), with the source to render them against.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    /// Every error found, in file order.
    public var diagnostics: [PipelineDiagnostic]
    /// The file's text, for rendering each diagnostic with its source line.
    public var source: String

    /// Each diagnostic rendered, separated by blank lines.
    public var description: String {
        diagnostics.map { $0.rendered(source: source) }.joined(separator: "\n\n")
    }
}
