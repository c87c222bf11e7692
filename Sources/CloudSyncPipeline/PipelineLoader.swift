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

    /// Loads the file at `path`; relative paths inside resolve against its directory.
    public static func load(
        path: String, registry: ProviderRegistry, jobTypes: JobRegistry = BuiltInJobs.registry,
        environment: [String: String] = ProcessInfo.processInfo.environment
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
            registry: registry, jobTypes: jobTypes, environment: environment)
    }

    /// Loads pipeline text; `file` names it in errors and `directory` anchors its relative paths.
    public static func load(
        source: String, file: String, directory: String, registry: ProviderRegistry,
        jobTypes: JobRegistry = BuiltInJobs.registry, environment: [String: String] = [:]
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
            root = parsed
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
        var reader = Reader(
            diagnostics: diagnostics, interpolator: Interpolator(environment: environment, directory: directory),
            registry: registry, jobTypes: jobTypes)
        let spec = reader.pipeline(root, file: file, source: source, directory: directory)
        guard diagnostics.items.isEmpty, let spec else {
            throw diagnostics.pipelineError(source: source)
        }
        return spec
    }
}

/// The YAML error, with what to do when it is the usual cause: a `{` or `}` of `${env:NAME}` or `{startedAt}` in an
/// unquoted value inside a `{ }` flow mapping, which YAML reads as the mapping's own braces.
private func withQuotingHint(_ error: YAMLError, source: String) -> String {
    guard error.message.contains("flow mapping") || error.message.contains("flow sequence") else {
        return error.message
    }
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

/// Walks the node tree of one file.
private struct Reader {
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

    mutating func pipeline(_ root: YAMLNode, file: String, source: String, directory: String) -> PipelineSpec? {
        guard
            let top = mapping(
                root, "the pipeline", ["version", "name", "state", "providers", "codecs", "store", "jobs", "report"])
        else { return nil }

        var version = PipelineLoader.formatVersion
        if let node = top.require("version"), let text = top.scalarText(node, field: "version") {
            if case .scalar(_, let style) = node.content, style != .plain, !text.isInterpolated {
                diagnostics.error(
                    "`version` must be the number 1, not the text \(text.quoted); write version: 1 without quotes",
                    at: node.mark)
            } else if let number = Int(text.value), number == PipelineLoader.formatVersion {
                version = number
            } else if let number = Int(text.value), number > PipelineLoader.formatVersion {
                diagnostics.error(
                    "version \(text.isInterpolated ? text.quoted : String(number)) is not supported: this cloudsync "
                        + "reads version \(PipelineLoader.formatVersion); upgrade cloudsync to run this file",
                    at: node.mark)
            } else {
                diagnostics.error("`version` must be 1; found \(text.quoted)", at: node.mark)
            }
        }
        guard let nameNode = top.require("name") else { return nil }
        let nameText = top.scalarText(nameNode, field: "name")
        let name = nameText?.value ?? ""
        if let nameText, !name.isEmpty, !isIdentifier(name) {
            diagnostics.error(
                "`name` may contain only ASCII letters, digits, '.', '_' and '-' (it names the state directory); found \(nameText.quoted)",
                at: nameNode.mark)
        }
        var state = resolvePath(".cloudsync/\(name)", against: directory)
        if let node = top["state"], let text = top.scalarText(node, field: "state") {
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
        }

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
        let jobs = jobSpecs(top["jobs"], providerIDs: providerIDs, codecIDs: codecIDs, directory: directory)
        var reportPath: String?
        var reportLatest: String?
        var reportKeep: Int?
        var reportMetrics: String?
        if let reportNode = top["report"],
            let report = mapping(reportNode, "report", ["path", "latest", "keep", "metrics"])
        {
            reportPath = report.path("path").map { resolvePath($0.value, against: directory) }
            reportLatest = report.path("latest").map { resolvePath($0.value, against: directory) }
            reportKeep = report.integer("keep", minimum: 1, unit: " of reports").map(Int.init)
            reportMetrics = report.path("metrics").map { resolvePath($0.value, against: directory) }
        }
        guard let store else { return nil }
        return PipelineSpec(
            file: file, source: source, directory: directory, version: version, name: name, state: state,
            providers: providers,
            codecs: codecs, store: store, jobs: jobs, reportPath: reportPath, reportLatest: reportLatest,
            reportKeep: reportKeep, reportMetrics: reportMetrics,
            warnings: providers.compactMap { provider in
                registry.type(named: provider.type)?.unavailableHere.map {
                    PipelineDiagnostic(
                        file: file, mark: provider.mark, message: "provider `\(provider.id)` (\(provider.type)): \($0)",
                        isWarning: true)
                }
            }, writtenName: nameText?.display)
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

    // MARK: Providers

    func providerSpecs(_ node: YAMLNode?, directory: String, codecIDs: DeclaredIDs) -> [ProviderSpec] {
        guard let node else { return [] }
        guard let pairs = node.mapping else {
            diagnostics.error("`providers` must map provider ids to providers; found \(describe(node))", at: node.mark)
            return []
        }
        if pairs.isEmpty { diagnostics.error("`providers` declares no provider; declare at least one", at: node.mark) }
        return pairs.compactMap { pair in
            guard let id = id(pair.key, what: "provider") else { return nil }
            return providerSpec(id: id, pair.key.mark, pair.value, directory: directory, codecIDs: codecIDs)
        }
    }

    /// One provider: `type` first, then the fields that type's factory describes, each checked by its kind.
    func providerSpec(id: String, _ mark: YAMLMark, _ node: YAMLNode, directory: String, codecIDs: DeclaredIDs)
        -> ProviderSpec?
    {
        let context = "provider `\(id)`"
        let common = ["type"] + ProviderType.commonFields.map(\.name)
        // Every field some type has passes the unknown-field check; one that belongs to another type is refused
        // below with a message naming the types it belongs to.
        var known = common
        for type in registry.types { known += type.fields.map(\.name).filter { !known.contains($0) } }
        // An unknown field's did-you-mean picks among the fields of this provider's own type.
        let ownFields = (node["type"]?.scalar).flatMap { registry.type(named: $0) }.map {
            common + $0.fields.map(\.name)
        }
        guard let provider = mapping(node, context, known, suggesting: ownFields),
            let typeNode = provider.require("type"), let typeText = provider.scalarText(typeNode, field: "type")
        else { return nil }
        let typeName = typeText.value
        guard let type = registry.type(named: typeName) else {
            let names = registry.types.map(\.name)
            var message =
                "`type` in \(context) must be one of \(names.joined(separator: ", ")); found \(typeText.quoted)"
            if let guess = closest(typeName, among: names) { message += "; did you mean \(guess)?" }
            diagnostics.error(message, at: typeNode.mark)
            return nil
        }
        var valid = true
        for pair in node.mapping ?? [] {
            guard let name = pair.key.scalar, !common.contains(name), type.field(named: name) == nil,
                known.contains(name)
            else { continue }
            let owners = registry.types.filter { $0.field(named: name) != nil }.map(\.name)
            diagnostics.error(
                "a \(type.name) provider has no `\(name)`; it applies to \(listed(owners)) providers only",
                at: pair.key.mark)
            valid = false
        }
        var values: [String: ProviderFieldValue] = [:]
        var written: [String: Interpolated] = [:]
        for field in type.fields {
            guard let fieldNode = field.required ? provider.require(field.name) : provider[field.name] else {
                if field.required { valid = false }
                continue
            }
            switch field.kind {
            case .text, .path:
                guard var text = provider.scalarText(fieldNode, field: field.name) else {
                    valid = false
                    continue
                }
                if field.kind == .path {
                    guard provider.isUsablePath(text, field: field.name, at: fieldNode.mark) else {
                        valid = false
                        continue
                    }
                    text = Interpolated(value: resolvePath(text.value, against: directory), written: text.written)
                }
                values[field.name] = .text(text.value)
                written[field.name] = text
            case .integer(let minimum, let unit):
                guard
                    let number = provider.integer(field.name, minimum: minimum, unit: unit.isEmpty ? "" : " of \(unit)")
                else {
                    valid = false
                    continue
                }
                values[field.name] = .integer(number)
                written[field.name] = provider.scalarText(fieldNode, field: field.name)
            case .boolean:
                guard let flag = provider.boolean(field.name) else {
                    valid = false
                    continue
                }
                values[field.name] = .boolean(flag)
                written[field.name] = provider.scalarText(fieldNode, field: field.name)
            case .choice(let options):
                guard let text = provider.choice(field.name, among: options) else {
                    valid = false
                    continue
                }
                values[field.name] = .text(text.value)
                written[field.name] = text
            case .textMap:
                guard let pairs = fieldNode.mapping else {
                    diagnostics.error(
                        "`\(field.name)` in \(context) must map keys to values; found \(describe(fieldNode))",
                        at: fieldNode.mark)
                    valid = false
                    continue
                }
                values[field.name] = .textMap(
                    pairs.compactMap { pair in
                        guard let key = pair.key.scalar, let value = provider.scalarText(pair.value, field: field.name)
                        else { return nil }
                        return KeyValue(key, value.value)
                    })
            }
        }
        let maxValueBytes = provider.integer("maxValueBytes", minimum: 1, unit: " of bytes").map(Int.init)
        var codec: String?
        if let node = provider["codec"], let text = provider.scalarText(node, field: "codec") {
            if reference(text, at: node.mark, among: codecIDs, what: "codec") { codec = text.value }
        }
        guard valid else { return nil }
        let fields = ProviderFieldValues(values, environment: interpolator.environment)
        do {
            return ProviderSpec(
                id: id, type: type.name, configured: try type.configuration(from: fields), fields: fields,
                written: written, secretFields: type.fields.filter { $0.secret && values[$0.name] != nil }.map(\.name),
                maxValueBytes: maxValueBytes, codec: codec, mark: mark)
        } catch {
            // A factory quotes the values it refuses; one that came from ${env:…} or ${file:…} is named instead.
            let message = written.values.sorted { $0.value.count > $1.value.count }.reduce(error.message) {
                $1.redacting($0)
            }
            diagnostics.error(
                "\(context): \(message)", at: error.field.flatMap { provider[$0]?.mark } ?? typeNode.mark)
            return nil
        }
    }

    /// `a`, `a and b`, `a, b and c`.
    func listed(_ words: [String]) -> String {
        words.count < 2 ? words.joined() : words.dropLast().joined(separator: ", ") + " and " + words.last!
    }

    // MARK: Codecs

    func codecSpecs(_ node: YAMLNode?, directory: String) -> [CodecSpec] {
        guard let node else { return [] }
        guard let pairs = node.mapping else {
            diagnostics.error("`codecs` must map codec ids to codecs; found \(describe(node))", at: node.mark)
            return []
        }
        return pairs.compactMap { pair in
            guard let id = id(pair.key, what: "codec") else { return nil }
            if id == "none" {
                diagnostics.error("`none` is reserved (it means no codec); choose another codec id", at: pair.key.mark)
            }
            let context = "codec `\(id)`"
            guard let codec = mapping(pair.value, context, ["type", "keys", "allowPlaintext"]) else { return nil }
            if let type = codec.require("type"), let text = codec.scalarText(type, field: "type"),
                text.value != "xchacha20poly1305"
            {
                diagnostics.error("`type` in \(context) must be xchacha20poly1305; found \(text.quoted)", at: type.mark)
            }
            var keys: [CodecSpec.Key] = []
            var keyIDs: Set<String> = []
            if let list = codec.require("keys") {
                if let items = list.sequence {
                    if items.isEmpty { diagnostics.error("\(context) needs at least one key", at: list.mark) }
                    for item in items {
                        guard let key = keySpec(item, codec: id, directory: directory) else { continue }
                        if !keyIDs.insert(key.id).inserted {
                            diagnostics.error("key id `\(key.id)` appears twice in \(context)", at: item.mark)
                        } else {
                            keys.append(key)
                        }
                    }
                } else {
                    diagnostics.error(
                        "`keys` in \(context) must be a list of keys; found \(describe(list))", at: list.mark)
                }
            }
            return CodecSpec(
                id: id, keys: keys, allowPlaintext: codec.boolean("allowPlaintext") ?? false, mark: pair.key.mark)
        }
    }

    func keySpec(_ node: YAMLNode, codec: String, directory: String) -> CodecSpec.Key? {
        guard let key = mapping(node, "a key of codec `\(codec)`", ["id", "file", "env", "passphrase"]),
            let idNode = key.require("id"), let idText = key.scalarText(idNode, field: "id")
        else { return nil }
        let id = idText.value
        guard isIdentifier(id) else {
            diagnostics.error(
                "key id \(idText.quoted) may contain only ASCII letters, digits, '.', '_' and '-'", at: idNode.mark)
            return nil
        }
        let sources = ["file", "env", "passphrase"].filter { key[$0] != nil }
        guard sources.count == 1 else {
            diagnostics.error(
                "key `\(id)` needs exactly one of `file`, `env` or `passphrase`"
                    + (sources.isEmpty ? "" : "; found \(sources.joined(separator: " and "))"), at: node.mark)
            return nil
        }
        switch sources[0] {
        case "file":
            return key.path("file").map {
                .init(
                    id: id,
                    source: .file(Interpolated(value: resolvePath($0.value, against: directory), written: $0.written)),
                    mark: node.mark)
            }
        case "env":
            return key.string("env").map { .init(id: id, source: .environment($0.value), mark: node.mark) }
        default:
            guard let secret = mapping(key["passphrase"]!, "the passphrase of key `\(id)`", ["env", "file"]) else {
                return nil
            }
            if let variable = secret.string("env"), secret["file"] == nil {
                return .init(id: id, source: .passphraseEnvironment(variable.value), mark: node.mark)
            }
            if let file = secret.path("file"), secret["env"] == nil {
                return .init(
                    id: id,
                    source: .passphraseFile(
                        Interpolated(value: resolvePath(file.value, against: directory), written: file.written)),
                    mark: node.mark)
            }
            diagnostics.error(
                "the passphrase of key `\(id)` needs exactly one of `env` or `file`", at: secret.node.mark)
            return nil
        }
    }

    // MARK: Store

    func storeSpec(_ node: YAMLNode, providerIDs: DeclaredIDs?, codecIDs: DeclaredIDs) -> StoreSpec? {
        let fields = [
            "providers", "writeMode", "tiering", "resolver", "repairOnRead", "validateKeys", "timeoutMs", "codec",
            "outbox",
        ]
        guard let store = mapping(node, "store", fields) else { return nil }
        var order: [String] = []
        var seen: Set<String> = []
        if let listed = store.textList("providers") {
            for (id, mark) in listed {
                if seen.contains(id.value) {
                    diagnostics.error(
                        "provider `\(id.value)` is listed twice in store.providers; list each once", at: mark)
                } else if reference(id, at: mark, among: providerIDs, what: "provider") {
                    order.append(id.value)
                    seen.insert(id.value)
                }
            }
            if listed.isEmpty { diagnostics.error("store.providers lists no provider", at: store["providers"]!.mark) }
        } else {
            _ = store.require("providers")
        }
        let writeMode = store.choice("writeMode", WriteMode.self) ?? .failover
        let resolver = resolverSpec(store["resolver"])
        var codec: String?
        if let node = store["codec"], let text = store.scalarText(node, field: "codec"), text.value != "none" {
            if reference(text, at: node.mark, among: codecIDs, what: "codec") { codec = text.value }
        }
        return StoreSpec(
            providers: order, writeMode: writeMode, tiering: tieringSpec(store["tiering"]), resolver: resolver,
            repairOnRead: store.boolean("repairOnRead") ?? true, validateKeys: store.boolean("validateKeys") ?? true,
            timeoutMs: Int(
                store.integer("timeoutMs", minimum: 1, unit: " of milliseconds")
                    ?? StoreOptions.defaultTimeout.milliseconds), codec: codec,
            outbox: outboxSpec(store["outbox"]))
    }

    func tieringSpec(_ node: YAMLNode?) -> TieringSpec {
        guard let node else { return .auto }
        if let text = node.scalar {
            switch text {
            case "auto": return .auto
            case "off": return .off
            default:
                diagnostics.error(
                    "`tiering` must be auto, off, or a mapping of thresholds; found \"\(text)\"", at: node.mark)
                return .auto
            }
        }
        guard let tiering = mapping(node, "tiering", ["kvMaxBytes", "recordMaxBytes"]) else { return .auto }
        return .thresholds(
            kvMaxBytes: Int(
                tiering.integer("kvMaxBytes", minimum: 1, unit: " of bytes") ?? Int64(Tiering.defaultKVMaxBytes)),
            recordMaxBytes: Int(
                tiering.integer("recordMaxBytes", minimum: 1, unit: " of bytes") ?? Int64(Tiering.defaultRecordMaxBytes)
            ))
    }

    func resolverSpec(_ node: YAMLNode?) -> ResolverSpec {
        guard let node else { return .none }
        if node.scalar == "none" { return .none }
        guard let resolver = mapping(node, "resolver", ["type", "field", "id"]) else { return .none }
        enum Kind: String, CaseIterable { case none, timestamp, union }
        switch resolver.choice("type", Kind.self, required: true) {
        case .timestamp:
            if let extra = resolver["id"] {
                diagnostics.error("a timestamp resolver takes `field`, not `id`", at: extra.mark)
            }
            return .timestamp(field: resolver.string("field", required: true)?.value ?? "updatedAt")
        case .union:
            if let extra = resolver["field"] {
                diagnostics.error("a union resolver takes `id`, not `field`", at: extra.mark)
            }
            return .union(id: resolver.string("id")?.value)
        default:
            return .none
        }
    }

    func outboxSpec(_ node: YAMLNode?) -> OutboxSpec {
        var spec = OutboxSpec()
        guard let node,
            let outbox = mapping(node, "store.outbox", ["enabled", "maxEntries", "maxAttempts", "maxAgeMs"])
        else { return spec }
        spec.enabled = outbox.boolean("enabled") ?? true
        spec.maxEntries = Int(outbox.integer("maxEntries", minimum: 1) ?? Int64(Outbox.Limits.defaultMaxEntries))
        spec.maxAttempts = Int(outbox.integer("maxAttempts", minimum: 1) ?? Int64(Outbox.Limits.defaultMaxAttempts))
        spec.maxAgeMs =
            outbox.integer("maxAgeMs", minimum: 1, unit: " of milliseconds") ?? Outbox.Limits.defaultMaxAge.milliseconds
        return spec
    }

    // MARK: Jobs

    func jobSpecs(_ node: YAMLNode?, providerIDs: DeclaredIDs?, codecIDs: DeclaredIDs, directory: String) -> [JobSpec] {
        guard let node else { return [] }
        guard let items = node.sequence else {
            diagnostics.error("`jobs` must be a list of jobs; found \(describe(node))", at: node.mark)
            return []
        }
        // Names in file order, so `needs` can be checked against the jobs declared before each one.
        var earlier: [String] = []
        var names = Set<String>()
        var specs: [JobSpec] = []
        for (index, item) in items.enumerated() {
            let typeName = item["type"]?.scalar ?? ""
            let type = jobTypes.type(named: typeName)
            let context = "job \(index + 1)" + (typeName.isEmpty ? "" : " (\(typeName))")
            let common = ["type"] + RegisteredJobType.commonFields.map(\.name)
            // A job of an unknown type is reported once, for its type, not again for each of its fields.
            let allowed =
                type.map { common + $0.fields.map(\.name) } ?? item.mapping?.compactMap(\.key.scalar) ?? common
            guard let job = mapping(item, context, allowed) else {
                earlier.append("\(index + 1)-\(typeName)")
                continue
            }
            let nameText = job.string("name")
            let name = nameText?.value ?? "\(index + 1)-\(typeName)"
            defer { earlier.append(name) }
            if !names.insert(name).inserted {
                diagnostics.error(
                    "two jobs are named \(nameText?.quoted ?? "\"\(name)\""); job names must be unique", at: item.mark)
            }
            guard let typeNode = job.require("type") else { continue }
            guard let type else {
                let types = jobTypes.types.map(\.name)
                var message = "unknown job type \"\(typeName)\"; expected one of: \(types.joined(separator: ", "))"
                if let guess = closest(typeName, among: types) {
                    message = "unknown job type \"\(typeName)\"; did you mean \(guess)?"
                }
                diagnostics.error(message, at: typeNode.mark)
                continue
            }
            let needs = jobNeeds(job, name: name, earlier: earlier, all: items, context: context)
            guard
                let values = jobFields(
                    job, type: type, context: context, providerIDs: providerIDs, codecIDs: codecIDs,
                    directory: directory)
            else { continue }
            do {
                specs.append(
                    JobSpec(
                        type: type.name, name: name, needs: needs, job: try type.configuration(from: values),
                        mark: item.mark))
            } catch {
                diagnostics.error(
                    "\(context): \(error.message)", at: error.field.flatMap { job[$0]?.mark } ?? typeNode.mark)
            }
        }
        return specs
    }

    /// `needs`: names of jobs declared earlier in the file (so the graph has no cycle and file order stays a valid
    /// order to run in).
    func jobNeeds(_ job: MappingReader, name: String, earlier: [String], all items: [YAMLNode], context: String)
        -> [String]
    {
        guard let listed = job.textList("needs") else { return [] }
        let later = items.enumerated().map { index, item in
            item["name"]?.scalar ?? "\(index + 1)-\(item["type"]?.scalar ?? "")"
        }
        var needs: [String] = []
        for (text, mark) in listed {
            let needed = text.value
            if needed == name {
                diagnostics.error("job `\(name)` needs itself; a job can only need jobs before it", at: mark)
            } else if earlier.contains(needed) {
                if needs.contains(needed) {
                    diagnostics.error("`needs` in \(context) lists `\(needed)` twice; list each job once", at: mark)
                } else {
                    needs.append(needed)
                }
            } else if later.contains(needed) {
                diagnostics.error(
                    "job `\(name)` needs `\(needed)`, which comes after it; jobs run in file order, so move "
                        + "`\(needed)` before `\(name)` (a need on a later job would be a cycle or never be met)",
                    at: mark)
            } else {
                var message = "`needs` in \(context) names no job `\(needed)`"
                if let guess = closest(needed, among: earlier) {
                    message += "; did you mean `\(guess)`?"
                } else {
                    message +=
                        earlier.isEmpty
                        ? "; no job comes before it" : "; the jobs before it: \(earlier.joined(separator: ", "))"
                }
                diagnostics.error(message, at: mark)
            }
        }
        return needs
    }

    /// A job's own fields, each read and checked by its kind (references against the ids the file declares); nil
    /// when one is wrong (its error reported).
    func jobFields(
        _ job: MappingReader, type: RegisteredJobType, context: String, providerIDs: DeclaredIDs?,
        codecIDs: DeclaredIDs,
        directory: String
    ) -> JobFieldValues? {
        var values: [String: JobFieldValue] = [:]
        var valid = true
        for field in type.fields {
            guard let node = field.required ? job.require(field.name) : job[field.name] else {
                if field.required { valid = false }
                continue
            }
            var value: JobFieldValue?
            switch field.kind {
            case .provider, .providerOrStore, .providerOrAll:
                if let text = job.scalarText(node, field: field.name) {
                    let word = field.kind == .providerOrStore ? "store" : field.kind == .providerOrAll ? "all" : nil
                    if text.value == word || reference(text, at: node.mark, among: providerIDs, what: "provider") {
                        value = .text(text.value)
                    }
                }
            case .providers:
                if let listed = job.textList(field.name) {
                    let known = listed.filter { reference($0.text, at: $0.mark, among: providerIDs, what: "provider") }
                    if known.count == listed.count { value = .list(known.map(\.text.value)) }
                }
            case .codec:
                if let text = job.scalarText(node, field: field.name),
                    reference(text, at: node.mark, among: codecIDs, what: "codec")
                {
                    value = .text(text.value)
                }
            case .keys:
                if let patterns = job.textList(field.name) {
                    var wellFormed = true
                    for pattern in patterns {
                        do throws(Glob.SyntaxError) {
                            _ = try Glob(pattern.text.value)
                        } catch {
                            wellFormed = false
                            diagnostics.error(
                                "`\(field.name)` in \(context): \(pattern.text.redacting(error.message))",
                                at: pattern.mark)
                        }
                    }
                    if wellFormed { value = .list(patterns.map(\.text.value)) }
                }
            case .path:
                value = job.path(field.name).map {
                    .path(Interpolated(value: resolvePath($0.value, against: directory), written: $0.written))
                }
            case .boolean:
                value = job.boolean(field.name).map { .boolean($0) }
            case .fraction:
                value = job.number(field.name, in: 0...1).map { .number($0) }
            case .choice(let options):
                value = job.choice(field.name, among: options).map { .text($0.value) }
            case .deleteLimit:
                if let text = job.scalarText(node, field: field.name) {
                    if let limit = DeleteLimit(text: text.value) {
                        value = .deleteLimit(limit)
                    } else {
                        diagnostics.error(
                            "`\(field.name)` in \(context) must be a whole number of keys (at least 0) or a "
                                + "percentage from 0% to 100% like \"50%\"; found \(text.quoted)", at: node.mark)
                    }
                }
            }
            if let value { values[field.name] = value } else { valid = false }
        }
        return valid ? JobFieldValues(values) : nil
    }
}
