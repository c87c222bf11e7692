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

/// The errors of one pipeline file — every one counted, the first ``reportedLimit`` of them kept — with the source
/// to render them against.
public struct PipelineError: Error, Sendable, CustomStringConvertible {
    /// How many errors are kept and shown; a file with more says how many it left out.
    public static let reportedLimit = 100

    /// The first errors found, in file order, at most ``reportedLimit``.
    public var diagnostics: [PipelineDiagnostic]
    /// How many errors the file has, those kept in ``diagnostics`` and those left out.
    public var count: Int
    /// The file's text, for rendering each diagnostic with its source line.
    public var source: String

    /// The first ``reportedLimit`` of `diagnostics` in file order, counting them all.
    init(diagnostics: [PipelineDiagnostic], source: String) {
        self.diagnostics = Array(diagnostics.sorted { $0.mark < $1.mark }.prefix(Self.reportedLimit))
        self.count = diagnostics.count
        self.source = source
    }

    /// Each diagnostic rendered, separated by blank lines, then how many were left out, if any.
    public var description: String {
        let lines = SourceLines(source)
        var text = diagnostics.map { diagnostic in
            YAMLError.render(
                diagnostic.message, at: diagnostic.mark, file: diagnostic.file, lines: lines,
                severity: diagnostic.isWarning ? "warning" : "error")
        }.joined(separator: "\n\n")
        if count > diagnostics.count {
            text += "\n\nand \(count - diagnostics.count) more errors not shown; fix these and validate again"
        }
        return text
    }
}
