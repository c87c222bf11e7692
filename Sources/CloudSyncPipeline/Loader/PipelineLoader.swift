import CloudSync
import CloudSyncYAML
import Foundation

/// Reads pipeline files (format version 1) into ``PipelineSpec``s, reporting every error a person can make with
/// its line and column.
public enum PipelineLoader {
    /// A pipeline is written by hand; anything larger is refused before parsing.
    public static let maximumFileBytes = 4 << 20
    /// The one format version this build reads.
    public static let formatVersion = 1

    /// What an unset `${env:…}` variable in a provider's text field (a key, a token, a bucket) does.
    public enum UnsetVariables: Sendable {
        /// It is an error naming the variable: what every command that may reach a provider wants.
        case refused
        /// It is left unread and listed in ``PipelineSpec/unsetVariables``: for commands that read only local state
        /// (`history`, `outbox list`, `plan`), which must work where the secrets are not given. Such a spec must
        /// never open a provider.
        case deferred
    }

    /// Loads the file at `path`; relative paths inside resolve against its directory.
    ///
    /// `amendment` adds providers and replaces the jobs before the file is read (a command that runs one job of its
    /// own through the file's state and codecs).
    public static func load(
        path: String, registry: ProviderRegistry, jobTypes: JobRegistry,
        environment: [String: String] = ProcessInfo.processInfo.environment, unsetVariables: UnsetVariables = .refused,
        amendment: PipelineAmendment? = nil
    ) throws(PipelineError) -> PipelineSpec {
        let absolute = resolvePath(path, against: FileManager.default.currentDirectoryPath)
        let start = YAMLMark(line: 1, column: 1)
        let data: Data
        do throws(RegularFile.Failure) {
            data = try RegularFile.read(absolute, maximumBytes: maximumFileBytes)
        } catch {
            let message =
                error.size.map { "the file is \($0) bytes; a pipeline file may be at most \(maximumFileBytes) bytes" }
                ?? "cannot read the pipeline file: it \(error.reason); check the path"
            throw PipelineError(
                diagnostics: [PipelineDiagnostic(file: path, mark: start, message: message)], source: "")
        }
        guard let source = String(data: data, encoding: .utf8) else {
            throw PipelineError(
                diagnostics: [PipelineDiagnostic(file: path, mark: start, message: "the file is not UTF-8 text")],
                source: "")
        }
        return try load(
            source: source, file: path, directory: (absolute as NSString).deletingLastPathComponent,
            registry: registry, jobTypes: jobTypes, environment: environment, unsetVariables: unsetVariables,
            amendment: amendment)
    }

    /// Loads pipeline text; `file` names it in errors and `directory` anchors its relative paths.
    public static func load(
        source: String, file: String, directory: String, registry: ProviderRegistry,
        jobTypes: JobRegistry, environment: [String: String] = [:],
        unsetVariables: UnsetVariables = .refused, amendment: PipelineAmendment? = nil
    ) throws(PipelineError) -> PipelineSpec {
        let diagnostics = Diagnostics(file: file)
        let root: YAMLNode
        do {
            guard let parsed = try YAMLParser(maximumNodes: 200_000, maximumDepth: 64).parse(source) else {
                throw PipelineError(
                    diagnostics: [
                        PipelineDiagnostic(
                            file: file, mark: YAMLMark(line: 1, column: 1),
                            message: "the file is empty; a pipeline starts with `version: 1`")
                    ], source: source)
            }
            root = amendment?.applied(to: parsed) ?? parsed
        } catch let error as YAMLError {
            throw PipelineError(
                diagnostics: [
                    PipelineDiagnostic(file: file, mark: error.mark, message: withQuotingHint(error, source: source))
                ], source: source)
        } catch let error as PipelineError {
            throw error
        } catch {
            preconditionFailure("the YAML parser throws only YAMLError")
        }
        var reader = PipelineReader(
            diagnostics: diagnostics,
            interpolator: Interpolator(
                environment: environment, directory: directory, defersUnsetVariables: unsetVariables == .deferred),
            registry: registry, jobTypes: jobTypes)
        guard var spec = reader.pipeline(root, file: file, source: source, directory: directory),
            diagnostics.items.isEmpty
        else {
            throw diagnostics.pipelineError(source: source)
        }
        // Warnings and the compiler's errors quote the file: never a secret written in it.
        spec.source = diagnostics.shown(source)
        spec.warnings += diagnostics.warnings
        let capabilities = Dictionary(spec.providers.map { ($0.id, $0.configured.capabilities) }) { first, _ in first }
        for job in spec.jobs {
            for warning in job.job.warnings(capabilities: { capabilities[$0] }) {
                spec.warnings.append(
                    PipelineDiagnostic(
                        file: file, mark: job.mark, message: "job `\(job.name)` (\(job.type)): \(warning)",
                        isWarning: true))
            }
        }
        spec.unsetVariables = spec.providers.flatMap(\.unsetVariables)
        return spec
    }
}

/// The YAML error, with what to do when it is the usual cause: a `{` or `}` of `${env:NAME}` or `{startedAt}` in an
/// unquoted value inside a `{ }` flow mapping, which YAML reads as the mapping's own braces.
private func withQuotingHint(_ error: YAMLError, source: String) -> String {
    guard error.inFlowCollection else { return error.message }
    let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
    guard error.mark.line >= 1, error.mark.line <= lines.count else { return error.message }
    let line = lines[error.mark.line - 1]
    let column = line.index(line.startIndex, offsetBy: min(max(error.mark.column - 1, 0), line.count))
    // The brace that ended the mapping too early stands just before where the parser stopped.
    guard line[..<column].contains("{"),
        line[line.index(after: line.firstIndex(of: "{") ?? line.startIndex)...]
            .contains(where: { $0 == "{" || $0 == "}" })
    else { return error.message }
    return error.message
        + "; a value holding `{` or `}` (such as ${env:NAME} or {startedAt}) must be quoted inside a { } mapping: "
        + "write it as 'value' or \"value\""
}

/// The ids one section of the file declares, for checking references in constant time and naming a few of them.
struct DeclaredIDs {
    /// Ids in file order (codecs: sorted).
    let ordered: [String]
    private let members: Set<String>

    init(_ ordered: [String]) {
        self.ordered = ordered
        members = Set(ordered)
    }

    var isEmpty: Bool { ordered.isEmpty }

    func contains(_ id: String) -> Bool { members.contains(id) }

    /// The declared id within two edits of `word`; not searched among thousands, where it would cost more than the
    /// rest of loading.
    func closest(to word: String) -> String? {
        ordered.count <= 500 ? CloudSyncPipeline.closest(word, among: ordered) : nil
    }

    /// The first ten ids, then how many more, for a message.
    var listed: String {
        let shown = ordered.prefix(10).joined(separator: ", ")
        return ordered.count > 10 ? shown + " and \(ordered.count - 10) more" : shown
    }
}

/// Walks the node tree of one file; what each top-level section is read into is in `PipelineLoader+<Section>.swift`.
struct PipelineReader {
    let diagnostics: Diagnostics
    let interpolator: Interpolator
    let registry: ProviderRegistry
    let jobTypes: JobRegistry

    /// `suggesting` lists the fields a did-you-mean picks from, when fewer than `allowed` (a provider's own type's).
    func mapping(_ node: YAMLNode, _ context: String, _ allowed: [String], suggesting: [String]? = nil)
        -> MappingReader?
    {
        MappingReader(node, context: context, allowed: allowed, suggesting: suggesting, diagnostics, interpolator)
    }

    /// The whole file: each section read in turn, every reference checked against what the file declares.
    mutating func pipeline(_ root: YAMLNode, file: String, source: String, directory: String) -> PipelineSpec? {
        guard
            let top = mapping(
                root, "the pipeline",
                [
                    "version", "name", "state", "schedule", "providers", "codecs", "store", "migrations", "jobs",
                    "report",
                ])
        else { return nil }
        let version = formatVersion(top)
        guard let nameNode = top.require("name") else { return nil }
        let nameText = top.scalarText(nameNode, field: "name")
        let name = nameText?.value ?? ""
        checkName(name, written: nameText, at: nameNode.mark)
        let (state, sharedState) = stateSpec(top, name: name, directory: directory)
        let codecs = codecSpecs(top["codecs"], directory: directory)
        let codecIDs = DeclaredIDs(
            Set(top["codecs"]?.mapping?.compactMap { $0.key.scalar }.filter(isIdentifier) ?? codecs.map(\.id))
                .sorted())
        let providersNode = top.require("providers")
        let providers = providerSpecs(providersNode, directory: directory, codecIDs: codecIDs)
        // References are checked against every id the file declares, so a provider with its own errors does not
        // also make each mention of it an error.
        // Nil when the providers section itself is broken: that error is reported once, not at every reference.
        let providerIDs = providersNode?.mapping.map { DeclaredIDs($0.compactMap(\.key.scalar).filter(isIdentifier)) }
        guard let storeNode = top.require("store") else { return nil }
        let store = storeSpec(storeNode, providerIDs: providerIDs, codecIDs: codecIDs)
        let migrations = migrationSpecs(
            top["migrations"], providerIDs: providerIDs, codecIDs: codecIDs, directory: directory)
        let jobs = jobSpecs(top["jobs"], providerIDs: providerIDs, codecIDs: codecIDs, directory: directory)
        if sharedState == nil {
            for job in jobs where job.job.sharding != nil {
                diagnostics.error(
                    "job `\(job.name)` is split into shards, which runners share through the pipeline's state in "
                        + "PostgreSQL; add state: { postgresql: \"${env:CLOUDSYNC_DATABASE_URL}\" }, or remove `shards`",
                    at: job.mark)
            }
        }
        let report = reportSpec(top["report"], directory: directory)
        let schedule = top["schedule"].flatMap(scheduleSpec)
        guard let store else { return nil }
        var spec = PipelineSpec(
            file: file, source: source, directory: directory, version: version, name: name, state: state,
            sharedState: sharedState, providers: providers,
            codecs: codecs, store: store, jobs: jobs, reportPath: report.path, reportLatest: report.latest,
            reportKeep: report.keep, reportMetrics: report.metrics,
            warnings: providers.compactMap { provider in
                registry.type(named: provider.type)?.unavailableHere.map {
                    PipelineDiagnostic(
                        file: file, mark: provider.mark, message: "provider `\(provider.id)` (\(provider.type)): \($0)",
                        isWarning: true)
                }
            }, writtenName: nameText?.display)
        spec.schedule = schedule
        spec.migrations = migrations
        return spec
    }

    /// `version`: the number 1, unquoted; a later version names the upgrade it needs.
    private func formatVersion(_ top: MappingReader) -> Int {
        guard let node = top.require("version"), let text = top.scalarText(node, field: "version") else {
            return PipelineLoader.formatVersion
        }
        if case .scalar(_, let style) = node.content, style != .plain, !text.isInterpolated {
            diagnostics.error(
                "`version` must be the number 1, not the text \(text.quoted); write version: 1 without quotes",
                at: node.mark)
        } else if let number = Int(text.value), number == PipelineLoader.formatVersion {
            return number
        } else if let number = Int(text.value), number > PipelineLoader.formatVersion {
            diagnostics.error(
                "version \(text.isInterpolated ? text.quoted : String(number)) is not supported: this cloudsync "
                    + "reads version \(PipelineLoader.formatVersion); upgrade cloudsync to run this file",
                at: node.mark)
        } else {
            diagnostics.error("`version` must be 1; found \(text.quoted)", at: node.mark)
        }
        return PipelineLoader.formatVersion
    }

    /// `name`, which names the state directory: an identifier, and neither `.` nor `..`.
    private func checkName(_ name: String, written: Interpolated?, at mark: YAMLMark) {
        if let written, !name.isEmpty, !isIdentifier(name) {
            diagnostics.error(
                "`name` may contain only ASCII letters, digits, '.', '_' and '-' (it names the state directory); found \(written.quoted)",
                at: mark)
        } else if name == "." || name == ".." {
            diagnostics.error(
                "`name` cannot be '\(name)': it names the state directory .cloudsync/NAME beside the file, which would "
                    + (name == "."
                        ? "be .cloudsync itself, where other pipelines keep theirs" : "be the file's own directory")
                    + "; give the pipeline a name such as nightly",
                at: mark)
        }
    }

    /// `state`: a directory (`.cloudsync/<name>` beside the file when absent), or a PostgreSQL schema.
    private func stateSpec(_ top: MappingReader, name: String, directory: String) -> (String, SharedStateSpec?) {
        var state = resolvePath(".cloudsync/\(name)", against: directory)
        if let node = top["state"], node.mapping != nil {
            return (state, sharedStateSpec(node))
        }
        guard let node = top["state"], let text = top.scalarText(node, field: "state") else { return (state, nil) }
        if text.value.isEmpty {
            diagnostics.error(
                "`state` must not be empty; leave it out for the default, .cloudsync/<name> beside the file",
                at: node.mark)
        } else if text.value.contains("\0") {
            diagnostics.error("`state` must not contain a NUL character", at: node.mark)
        } else {
            state = resolvePath(text.value, against: directory)
            if state == "/" {
                diagnostics.error(
                    "`state` must not be the root directory /; name a directory of its own, such as "
                        + "/var/lib/cloudsync/\(isIdentifier(name) ? name : "<name>")", at: node.mark)
            }
        }
        return (state, nil)
    }

    /// `report`: where reports, the latest report and the Prometheus textfile go, and how many reports are kept.
    private func reportSpec(_ node: YAMLNode?, directory: String)
        -> (path: String?, latest: String?, keep: Int?, metrics: String?)
    {
        guard let node, let report = mapping(node, "report", ["path", "latest", "keep", "metrics"]) else {
            return (nil, nil, nil, nil)
        }
        return (
            report.path("path").map { resolvePath($0.value, against: directory) },
            report.path("latest").map { resolvePath($0.value, against: directory) },
            report.integer("keep", minimum: 1, unit: " of reports").map(Int.init),
            report.path("metrics").map { resolvePath($0.value, against: directory) }
        )
    }

    /// `state: { postgresql: URL, schema: NAME }`: the URL is required and should come from `${env:…}` or
    /// `${file:…}` (it holds a password); the schema is an unquoted PostgreSQL name.
    func sharedStateSpec(_ node: YAMLNode) -> SharedStateSpec? {
        guard let fields = mapping(node, "state", ["postgresql", "schema"]) else { return nil }
        var schema = SharedStateSpec.defaultSchema
        if let schemaNode = fields["schema"], let text = fields.scalarText(schemaNode, field: "schema") {
            let bytes = Array(text.value.utf8)
            let valid =
                !bytes.isEmpty && bytes.count <= 63 && !(bytes[0] >= UInt8(ascii: "0") && bytes[0] <= UInt8(ascii: "9"))
                && bytes.allSatisfy {
                    ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z"))
                        || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                        || $0 == UInt8(ascii: "_")
                }
            if valid && !text.value.hasPrefix("pg_") {
                schema = text.value
            } else {
                diagnostics.error(
                    "`schema` must be a PostgreSQL name of at most 63 lowercase letters, digits and '_', not starting "
                        + "with a digit or pg_; found \(text.quoted)", at: schemaNode.mark)
            }
        }
        guard let urlNode = fields.require("postgresql"), let url = fields.scalarText(urlNode, field: "postgresql")
        else { return nil }
        guard !url.value.isEmpty, !url.value.contains("\0") else {
            diagnostics.error(
                "`postgresql` must be a libpq URL such as postgresql://cloudsync@db.example:5432/ops; found "
                    + (url.isInterpolated ? url.quoted : "nothing"), at: urlNode.mark)
            return nil
        }
        let passwordWord = url.value.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("password=") }
        if !url.isInterpolated,
            let password = URLComponents(string: url.value)?.percentEncodedPassword
                ?? passwordWord.map({
                    String($0.dropFirst("password=".count))
                })
        {
            diagnostics.mask(password)
            diagnostics.error(
                "`postgresql` holds a password in the file itself; put the URL in the environment and write "
                    + "postgresql: \"${env:CLOUDSYNC_DATABASE_URL}\" (or keep the password in ~/.pgpass)",
                at: urlNode.mark)
            return nil
        }
        return SharedStateSpec(url: url, schema: schema)
    }

    /// Ids (pipeline name, providers, codecs, keys) follow the one character rule of the core: CloudKit's
    /// record-name characters, which also name files safely.
    func isIdentifier(_ text: String) -> Bool {
        KeyRule.nonEmpty.allows(text) && KeyRule.recordNameCharacters.allows(text)
    }

    /// The id written as a mapping key, checked.
    func id(_ key: YAMLNode, what: String) -> String? {
        guard let text = key.scalar, isIdentifier(text) else {
            diagnostics.error(
                "\(what) id \(describe(key)) may contain only ASCII letters, digits, '.', '_' and '-'", at: key.mark)
            return nil
        }
        return text
    }

    func reference(_ text: Interpolated, at mark: YAMLMark, among ids: DeclaredIDs?, what: String) -> Bool {
        guard let ids else { return true }
        guard ids.contains(text.value) else {
            var message = text.isInterpolated ? "unknown \(what): \(text.quoted)" : "unknown \(what) `\(text.value)`"
            if let guess = ids.closest(to: text.value) {
                message += "; did you mean `\(guess)`?"
            } else {
                message += ids.isEmpty ? "; the file declares none" : "; the file declares: \(ids.listed)"
            }
            diagnostics.error(message, at: mark)
            return false
        }
        return true
    }
}
