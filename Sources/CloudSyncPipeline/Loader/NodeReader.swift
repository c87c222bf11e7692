import CloudSync
import CloudSyncYAML
import Foundation

/// Collects the errors of one file as the loader walks it, so a run reports them all.
///
/// It also remembers what each `${env:…}` and `${file:…}` expanded to: every reported message is checked for those
/// values and names the reference instead, so no error can print a secret even where a message quotes a value it
/// should not have.
final class Diagnostics {
    let file: String
    private(set) var items: [PipelineDiagnostic] = []
    /// What is worth saying about a file that still loads, in the order found.
    private(set) var warnings: [PipelineDiagnostic] = []
    /// Values read from the environment or from files, each with the reference it came from.
    private var expansions: [(reference: String, value: String)] = []
    private var expandedValues: Set<String> = []
    /// Secrets written in the file itself (a password in a URL), starred out of the source lines errors show.
    private var masked: [String] = []

    init(file: String) { self.file = file }

    func error(_ message: String, at mark: YAMLMark) {
        items.append(PipelineDiagnostic(file: file, mark: mark, message: message))
    }

    func warning(_ message: String, at mark: YAMLMark) {
        warnings.append(PipelineDiagnostic(file: file, mark: mark, message: message, isWarning: true))
    }

    /// Notes that `reference` expanded to `value`; values of fewer than four characters ("1", "true") are left to
    /// each message's own care, since replacing them everywhere would garble unrelated words.
    func noteExpansion(_ reference: String, value: String) {
        guard value.count >= 4, expandedValues.insert(value).inserted else { return }
        expansions.append((reference, value))
    }

    /// Stars `secret` out wherever a rendered error would show the file's text, keeping its length, so carets
    /// still point at the right column.
    func mask(_ secret: String) {
        guard !secret.isEmpty else { return }
        masked.append(secret)
    }

    /// `source` as messages may quote it: every masked secret starred out.
    func shown(_ source: String) -> String {
        masked.reduce(source) { $0.replacingOccurrences(of: $1, with: String(repeating: "*", count: $1.count)) }
    }

    /// The error reporting what was collected: the first ``PipelineError/reportedLimit`` in file order, counted
    /// all, with any expanded value a kept message holds replaced by its reference (longest values first).
    func pipelineError(source: String) -> PipelineError {
        var error = PipelineError(diagnostics: items, source: shown(source))
        let longestFirst = expansions.sorted { $0.value.count > $1.value.count }
        for index in error.diagnostics.indices {
            for expansion in longestFirst {
                error.diagnostics[index].message = error.diagnostics[index].message.replacingWholeWords(
                    expansion.value, with: expansion.reference)
            }
        }
        return error
    }
}

extension Interpolated {
    /// How an error quotes the value: as written in the file, or — when it came from `${env:…}` or `${file:…}` —
    /// the reference it came from, never the value itself.
    var quoted: String { isInterpolated ? "the value of \(written) (not shown)" : "\"\(value)\"" }

    /// `message` (a factory's, or one that quotes the value) with the value replaced by where it came from.
    func redacting(_ message: String) -> String {
        guard isInterpolated, !value.isEmpty else { return message }
        return message.replacingOccurrences(of: "\"\(value)\"", with: quoted)
            .replacingWholeWords(value, with: written)
    }
}

extension String {
    /// Every occurrence of `word` that is not part of a longer word (no letter or digit touches it) replaced.
    func replacingWholeWords(_ word: String, with replacement: String) -> String {
        guard !word.isEmpty, contains(word) else { return self }
        func isWordCharacter(_ character: Character?) -> Bool {
            character.map { $0.isLetter || $0.isNumber } ?? false
        }
        var result = ""
        var rest = self[...]
        while let found = rest.range(of: word) {
            let before = found.lowerBound > startIndex ? self[index(before: found.lowerBound)] : nil
            let after = found.upperBound < endIndex ? self[found.upperBound] : nil
            let touches =
                (isWordCharacter(before) && isWordCharacter(word.first))
                || (isWordCharacter(after) && isWordCharacter(word.last))
            result += rest[..<found.lowerBound]
            result += touches ? String(self[found]) : replacement
            rest = self[found.upperBound...]
        }
        return result + rest
    }
}

/// The variables an ``Interpolator`` left unread, with where.
final class UnsetVariableLog {
    private(set) var found: [(name: String, mark: YAMLMark)] = []

    func note(_ name: String, at mark: YAMLMark) {
        found.append((name, mark))
    }
}

/// Expands `${env:NAME}`, `${env:NAME:-default}` and `${file:path}` in scalar values (`$${` is a literal `${`).
struct Interpolator {
    /// What all `${file:…}` of one pipeline may read together: each file is capped like the pipeline file, and this
    /// keeps thousands of references to large files from filling memory.
    static let maximumTotalFileBytes = 8 * PipelineLoader.maximumFileBytes

    let environment: [String: String]
    let directory: String
    /// Whether an unset variable in a provider's text field (a key, a token, a bucket) is left unread (and noted in
    /// ``unset``) rather than an error.
    let defersUnsetVariables: Bool
    /// Bytes `${file:…}` may still read for this pipeline.
    private let fileBudget = FileBudget(Self.maximumTotalFileBytes)
    /// The variables left unread, in the order met.
    let unset = UnsetVariableLog()

    init(environment: [String: String], directory: String, defersUnsetVariables: Bool = false) {
        self.environment = environment
        self.directory = directory
        self.defersUnsetVariables = defersUnsetVariables
    }

    /// `text` expanded; where `deferrable` (a provider's text field) and ``defersUnsetVariables``, an unset variable
    /// stays written as it is (`${env:NAME}`), noted in ``unset``, instead of an error.
    func expand(_ text: String, at mark: YAMLMark, _ diagnostics: Diagnostics, deferrable: Bool = false)
        -> Interpolated?
    {
        guard text.contains("${") else { return Interpolated(value: text, written: text) }
        var output = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${") {
            if rest[..<start.lowerBound].hasSuffix("$") {
                output += rest[..<rest.index(before: start.lowerBound)] + "${"
                rest = rest[start.upperBound...]
                continue
            }
            output += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                diagnostics.error("unterminated ${ in \"\(text)\"; close it with }", at: mark)
                return nil
            }
            let reference = String(rest[start.upperBound..<end])
            guard
                let value = resolve(
                    reference, at: mark, diagnostics, deferring: deferrable && defersUnsetVariables)
            else { return nil }
            output += value
            rest = rest[rest.index(after: end)...]
        }
        output += rest
        return Interpolated(value: output, written: text)
    }

    private func resolve(_ reference: String, at mark: YAMLMark, _ diagnostics: Diagnostics, deferring: Bool)
        -> String?
    {
        if reference.hasPrefix("env:") {
            return environmentValue(reference, at: mark, diagnostics, deferring: deferring)
        }
        if reference.hasPrefix("file:") { return fileText(reference, at: mark, diagnostics) }
        diagnostics.error(
            "unknown interpolation \"${\(reference)}\"; use ${env:NAME}, ${env:NAME:-default} or ${file:path}", at: mark
        )
        return nil
    }

    /// `${env:NAME}` or `${env:NAME:-default}`: the variable's value, else the default; a variable that is not set
    /// and has none is an error, or, where reading is deferred, noted and left as written.
    private func environmentValue(_ reference: String, at mark: YAMLMark, _ diagnostics: Diagnostics, deferring: Bool)
        -> String?
    {
        let body = reference.dropFirst(4)
        let parts = body.split(separator: ":-", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            diagnostics.error("\"${\(reference)}\" does not name an environment variable", at: mark)
            return nil
        }
        if let value = environment[name] {
            diagnostics.noteExpansion("${env:\(name)}", value: value)
            return value
        }
        if parts.count == 2 { return String(parts[1]) }
        if deferring {
            unset.note(name, at: mark)
            return "${env:\(name)}"
        }
        diagnostics.error(
            "environment variable \(name) is not set; set it, or give a default with ${env:\(name):-value}",
            at: mark)
        return nil
    }

    /// `${file:path}`: the file's text without its last line break; only a regular file, within the per-file and
    /// per-pipeline byte budgets, and UTF-8.
    private func fileText(_ reference: String, at mark: YAMLMark, _ diagnostics: Diagnostics) -> String? {
        guard reference.count > 5, !reference.contains("\0") else {
            diagnostics.error("\"${\(reference)}\" does not name a file", at: mark)
            return nil
        }
        let path = resolvePath(String(reference.dropFirst(5)), against: directory)
        let data: Data
        do throws(RegularFile.Failure) {
            data = try RegularFile.read(path, maximumBytes: PipelineLoader.maximumFileBytes)
        } catch {
            if let size = error.size {
                diagnostics.error(
                    "\(path) for ${\(reference)} is \(size) bytes; a file read into the pipeline may be at most "
                        + "\(PipelineLoader.maximumFileBytes) bytes", at: mark)
            } else {
                diagnostics.error("cannot read \(path) for ${\(reference)}: it \(error.reason)", at: mark)
            }
            return nil
        }
        guard fileBudget.take(data.count) else {
            diagnostics.error(
                "${\(reference)} would take the files this pipeline reads to more than "
                    + "\(Self.maximumTotalFileBytes) bytes in all; read fewer or smaller files", at: mark)
            return nil
        }
        guard let text = String(data: data, encoding: .utf8) else {
            diagnostics.error("\(path) for ${\(reference)} is not UTF-8 text", at: mark)
            return nil
        }
        let value =
            text.hasSuffix("\r\n")
            ? String(text.dropLast(2)) : text.hasSuffix("\n") ? String(text.dropLast()) : text
        diagnostics.noteExpansion("${\(reference)}", value: value)
        return value
    }
}

/// A count of bytes left to read, shared by every copy of one pipeline's ``Interpolator``.
private final class FileBudget {
    private var remaining: Int

    init(_ bytes: Int) { remaining = bytes }

    /// Takes `bytes` from what is left; false (taking nothing) when not that many are left.
    func take(_ bytes: Int) -> Bool {
        guard bytes <= remaining else { return false }
        remaining -= bytes
        return true
    }
}

/// `path` made absolute against `directory` (never the working directory).
package func resolvePath(_ path: String, against directory: String) -> String {
    let absolute = path.hasPrefix("/") ? path : directory + "/" + path
    return (absolute as NSString).standardizingPath
}

/// Reads one mapping of the file: reports unknown fields (with a suggestion) once, and reads typed values, each
/// error naming the field and pointing at it.
struct MappingReader {
    let node: YAMLNode
    let context: String
    let diagnostics: Diagnostics
    let interpolator: Interpolator

    /// Nil (and an error) when `node` is not a mapping.
    init?(
        _ node: YAMLNode, context: String, allowed: [String], suggesting: [String]? = nil, _ diagnostics: Diagnostics,
        _ interpolator: Interpolator
    ) {
        guard let pairs = node.mapping else {
            diagnostics.error("\(context) must be a mapping of fields; found \(describe(node))", at: node.mark)
            return nil
        }
        self.node = node
        self.context = context
        self.diagnostics = diagnostics
        self.interpolator = interpolator
        for pair in pairs {
            guard let name = pair.key.scalar else {
                diagnostics.error("field names in \(context) must be plain text", at: pair.key.mark)
                continue
            }
            if !allowed.contains(name) {
                diagnostics.error(
                    unknownFieldMessage(name, in: context, allowed: suggesting ?? allowed), at: pair.key.mark)
            }
        }
    }

    subscript(_ field: String) -> YAMLNode? {
        guard let value = node[field], !value.isNull else { return nil }
        return value
    }

    func require(_ field: String) -> YAMLNode? {
        guard let value = self[field] else {
            diagnostics.error("\(context) needs `\(field)`", at: node.mark)
            return nil
        }
        return value
    }

    func string(_ field: String, required: Bool = false) -> Interpolated? {
        guard let value = required ? require(field) : self[field] else { return nil }
        return scalarText(value, field: field)
    }

    /// A path field's text (not yet resolved): never empty, never holding a NUL, which C would cut the path at.
    func path(_ field: String, required: Bool = false) -> Interpolated? {
        guard let value = required ? require(field) : self[field], let text = scalarText(value, field: field),
            isUsablePath(text, field: field, at: value.mark)
        else { return nil }
        return text
    }

    /// Whether `text` can name a file; an error says why not.
    func isUsablePath(_ text: Interpolated, field: String, at mark: YAMLMark) -> Bool {
        if text.value.isEmpty {
            diagnostics.error("`\(field)` in \(context) must not be empty", at: mark)
            return false
        }
        if text.value.contains("\0") {
            diagnostics.error("`\(field)` in \(context) must not contain a NUL character", at: mark)
            return false
        }
        return true
    }

    /// The field's text, interpolated; a `deferrable` one may be left unread (see
    /// ``Interpolator/defersUnsetVariables``).
    func scalarText(_ value: YAMLNode, field: String, deferrable: Bool = false) -> Interpolated? {
        guard let text = value.scalar else {
            diagnostics.error("`\(field)` in \(context) must be text; found \(describe(value))", at: value.mark)
            return nil
        }
        return interpolator.expand(text, at: value.mark, diagnostics, deferrable: deferrable)
    }

    func integer(_ field: String, minimum: Int64 = 0, unit: String = "") -> Int64? {
        guard let value = self[field], let text = scalarText(value, field: field) else { return nil }
        guard let number = Int64(text.value), number >= minimum else {
            diagnostics.error(
                "`\(field)` in \(context) must be a whole number\(unit) of at least \(minimum); found \(text.quoted)",
                at: value.mark)
            return nil
        }
        return number
    }

    func number(_ field: String, in range: ClosedRange<Double>) -> Double? {
        guard let value = self[field], let text = scalarText(value, field: field) else { return nil }
        guard let number = Double(text.value), range.contains(number) else {
            diagnostics.error(
                "`\(field)` in \(context) must be a number from \(range.lowerBound) to \(range.upperBound); found \(text.quoted)",
                at: value.mark)
            return nil
        }
        return number
    }

    func boolean(_ field: String) -> Bool? {
        guard let value = self[field], let text = scalarText(value, field: field) else { return nil }
        switch text.value {
        case "true": return true
        case "false": return false
        default:
            diagnostics.error("`\(field)` in \(context) must be true or false; found \(text.quoted)", at: value.mark)
            return nil
        }
    }

    func choice<T: RawRepresentable & CaseIterable>(_ field: String, _ type: T.Type, required: Bool = false) -> T?
    where T.RawValue == String {
        guard let value = required ? require(field) : self[field], let text = scalarText(value, field: field)
        else { return nil }
        guard let choice = T(rawValue: text.value) else {
            let options = T.allCases.map(\.rawValue)
            var message =
                "`\(field)` in \(context) must be one of \(options.joined(separator: ", ")); found \(text.quoted)"
            if let guess = closest(text.value, among: options) { message += "; did you mean \(guess)?" }
            diagnostics.error(message, at: value.mark)
            return nil
        }
        return choice
    }

    /// One of `options`, as text.
    func choice(_ field: String, among options: [String]) -> Interpolated? {
        guard let value = self[field], let text = scalarText(value, field: field) else { return nil }
        guard options.contains(text.value) else {
            var message =
                "`\(field)` in \(context) must be one of \(options.joined(separator: ", ")); found \(text.quoted)"
            if let guess = closest(text.value, among: options) { message += "; did you mean \(guess)?" }
            diagnostics.error(message, at: value.mark)
            return nil
        }
        return text
    }

    /// A list of text values, or a single text value taken as a list of one.
    func textList(_ field: String) -> [(text: Interpolated, mark: YAMLMark)]? {
        guard let value = self[field] else { return nil }
        if value.scalar != nil { return scalarText(value, field: field).map { [($0, value.mark)] } }
        guard let items = value.sequence else {
            diagnostics.error(
                "`\(field)` in \(context) must be a list of text; found \(describe(value))", at: value.mark)
            return nil
        }
        return items.compactMap { item in scalarText(item, field: field).map { ($0, item.mark) } }
    }
}

func describe(_ node: YAMLNode) -> String {
    switch node.content {
    case .scalar(let text, _): return node.isNull ? "nothing" : "\"\(text)\""
    case .sequence: return "a list"
    case .mapping: return "a mapping"
    }
}

func unknownFieldMessage(_ name: String, in context: String, allowed: [String]) -> String {
    var message = "unknown field `\(name)` in \(context)"
    if let guess = closest(name, among: allowed) {
        message += "; did you mean `\(guess)`?"
    } else {
        message += "; expected one of: \(allowed.joined(separator: ", "))"
    }
    return message
}

/// The candidate within two edits of `word` (ignoring case), if one is; else the only candidate `word` begins, when
/// it has three letters or more.
package func closest(_ word: String, among candidates: [String]) -> String? {
    let lowered = Array(word.lowercased())
    var best: (String, Int)?
    for candidate in candidates {
        let distance = editDistance(lowered, Array(candidate.lowercased()))
        if distance <= max(1, min(2, candidate.count / 3)), distance < (best?.1 ?? .max) {
            best = (candidate, distance)
        }
    }
    if let best { return best.0 }
    // A word cut short (`encrypted` for `encrypted-backup`) is too far from anything by edits; a word of three or more
    // letters that begins exactly one candidate is taken as meaning it.
    guard lowered.count >= 3 else { return nil }
    let started = candidates.filter { $0.lowercased().hasPrefix(String(lowered)) }
    return started.count == 1 ? started[0] : nil
}

private func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    var previous = Array(0...b.count)
    for (i, left) in a.enumerated() {
        var current = [i + 1] + Array(repeating: 0, count: b.count)
        for (j, right) in b.enumerated() {
            current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (left == right ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
