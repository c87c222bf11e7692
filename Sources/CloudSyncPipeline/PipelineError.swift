import CloudSyncYAML

/// One thing wrong with a pipeline file, where it is, and what to do.
public struct PipelineDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var mark: YAMLMark
    public var message: String

    public var description: String { "\(file):\(mark.line):\(mark.column): error: \(message)" }

    /// As a compiler prints it, with the source line and a caret.
    public func rendered(source: String) -> String {
        YAMLError.render(message, at: mark, file: file, source: source)
    }
}

/// Every error of one pipeline file (all of them, not just the first), with the source to render them against.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [PipelineDiagnostic]
    public var source: String

    /// Each diagnostic rendered, separated by blank lines.
    public var description: String {
        diagnostics.map { $0.rendered(source: source) }.joined(separator: "\n\n")
    }
}
