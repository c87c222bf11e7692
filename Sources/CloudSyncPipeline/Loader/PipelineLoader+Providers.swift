import CloudSync
import CloudSyncYAML
import Foundation

/// Reading `providers`: each provider's type and the fields that type declares.
extension PipelineReader {
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

    /// What a provider's own fields read to, for its factory and for output.
    struct ReadFields {
        var values: [String: ProviderFieldValue] = [:]
        /// As written in the file, so output shows references, never expanded secrets.
        var written: [String: Interpolated] = [:]
        var unsetVariables: [UnsetVariable] = []
        var valid = true
    }

    /// One provider: `type` first, then the fields that type's factory describes, each checked by its kind, then the
    /// fields every provider has; the factory checks the whole.
    func providerSpec(id: String, _ mark: YAMLMark, _ node: YAMLNode, directory: String, codecIDs: DeclaredIDs)
        -> ProviderSpec?
    {
        guard let (provider, type, typeNode) = providerType(id: id, node) else { return nil }
        var read = ReadFields()
        read.valid = refusesOthersFields(node, for: type)
        for field in type.fields {
            guard let fieldNode = field.required ? provider.require(field.name) : provider[field.name] else {
                if field.required { read.valid = false }
                continue
            }
            if !readField(field, fieldNode, of: type, provider: id, in: provider, directory: directory, into: &read) {
                read.valid = false
            }
        }
        let maxValueBytes = provider.integer("maxValueBytes", minimum: 1, unit: " of bytes").map(Int.init)
        var codec: String?
        if let node = provider["codec"], let text = provider.scalarText(node, field: "codec") {
            if reference(text, at: node.mark, among: codecIDs, what: "codec") { codec = text.value }
        }
        // A type with a field of its own named `account` (a storage account, say) keeps it; for the others it names
        // the account the provider signs in with.
        let accountNode = type.fields.contains { $0.name == "account" } ? nil : provider["account"]
        let account = accountNode.flatMap { accountName($0, in: provider, of: id) }
        guard read.valid else { return nil }
        guard var spec = configure(type, id: id, mark, read, provider: provider, typeNode: typeNode) else { return nil }
        if let node = accountNode, spec.configured.signIn == nil {
            diagnostics.error(
                "provider `\(id)` (\(type.name)) signs in to no account, so `account` means nothing for it; remove it",
                at: node.mark)
            return nil
        }
        spec.maxValueBytes = maxValueBytes
        spec.codec = codec
        spec.account = account
        return spec
    }

    /// The provider's mapping and its type, read first: the fields the mapping may hold depend on it.
    private func providerType(id: String, _ node: YAMLNode) -> (MappingReader, ProviderType, YAMLNode)? {
        let (common, known) = providerFieldNames()
        // An unknown field's did-you-mean picks among the fields of this provider's own type.
        let ownFields = (node["type"]?.scalar).flatMap { registry.type(named: $0) }.map {
            common + $0.fields.map(\.name)
        }
        guard let provider = mapping(node, "provider `\(id)`", known, suggesting: ownFields),
            let typeNode = provider.require("type"), let typeText = provider.scalarText(typeNode, field: "type")
        else { return nil }
        guard let type = registry.type(named: typeText.value) else {
            let names = registry.types.map(\.name)
            var message =
                "`type` in provider `\(id)` must be one of \(names.joined(separator: ", ")); found \(typeText.quoted)"
            if let guess = closest(typeText.value, among: names) { message += "; did you mean \(guess)?" }
            diagnostics.error(message, at: typeNode.mark)
            return nil
        }
        return (provider, type, typeNode)
    }

    /// The fields every provider has, and every field some type has: those pass the unknown-field check, and one that
    /// belongs to another type is refused by ``refusesOthersFields(_:for:)`` naming the types it belongs to.
    private func providerFieldNames() -> (common: [String], known: [String]) {
        let common = ["type"] + ProviderType.commonFields.map(\.name)
        var known = common
        for type in registry.types { known += type.fields.map(\.name).filter { !known.contains($0) } }
        return (common, known)
    }

    /// Refuses each field of `node` that another type has and `type` does not; false when there is one.
    private func refusesOthersFields(_ node: YAMLNode, for type: ProviderType) -> Bool {
        let (common, known) = providerFieldNames()
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
        return valid
    }

    /// Reads one field of the type's by its kind into `read`; false when it is not what the kind takes.
    private func readField(
        _ field: ProviderField, _ fieldNode: YAMLNode, of type: ProviderType, provider id: String,
        in provider: MappingReader, directory: String, into read: inout ReadFields
    ) -> Bool {
        switch field.kind {
        case .text, .path:
            return readText(field, fieldNode, of: type, provider: id, in: provider, directory: directory, into: &read)
        case .integer(let minimum, let unit):
            guard let number = provider.integer(field.name, minimum: minimum, unit: unit.isEmpty ? "" : " of \(unit)")
            else { return false }
            read.values[field.name] = .integer(number)
            read.written[field.name] = provider.scalarText(fieldNode, field: field.name)
        case .boolean:
            guard let flag = provider.boolean(field.name) else { return false }
            read.values[field.name] = .boolean(flag)
            read.written[field.name] = provider.scalarText(fieldNode, field: field.name)
        case .choice(let options):
            guard let text = provider.choice(field.name, among: options) else { return false }
            read.values[field.name] = .text(text.value)
            read.written[field.name] = text
        case .textMap:
            guard let pairs = fieldNode.mapping else {
                diagnostics.error(
                    "`\(field.name)` in provider `\(id)` must map keys to values; found \(describe(fieldNode))",
                    at: fieldNode.mark)
                return false
            }
            read.values[field.name] = .textMap(
                pairs.compactMap { pair in
                    guard let key = pair.key.scalar, let value = provider.scalarText(pair.value, field: field.name)
                    else { return nil }
                    return KeyValue(key, value.value)
                })
        }
        return true
    }

    /// A text or path field: interpolated (a variable left unread is noted for the field), a path resolved against
    /// the file's directory, and a secret written in the file itself warned about and kept out of every message.
    private func readText(
        _ field: ProviderField, _ fieldNode: YAMLNode, of type: ProviderType, provider id: String,
        in provider: MappingReader, directory: String, into read: inout ReadFields
    ) -> Bool {
        let unsetBefore = interpolator.unset.found.count
        guard var text = provider.scalarText(fieldNode, field: field.name, deferrable: field.kind == .text) else {
            return false
        }
        if field.kind == .path {
            guard provider.isUsablePath(text, field: field.name, at: fieldNode.mark) else { return false }
            text = Interpolated(value: resolvePath(text.value, against: directory), written: text.written)
        }
        read.values[field.name] = .text(text.value)
        read.written[field.name] = text
        for (variable, at) in interpolator.unset.found.dropFirst(unsetBefore) {
            read.unsetVariables.append(UnsetVariable(variable: variable, provider: id, field: field.name, mark: at))
        }
        if field.secret, !text.isInterpolated, !text.value.isEmpty, interpolator.unset.found.count == unsetBefore {
            diagnostics.mask(text.value)
            diagnostics.warning(
                "provider `\(id)` (\(type.name)): `\(field.name)` is a secret written in the file itself, where "
                    + "whoever reads the file, its backups or its history can read it; give it with "
                    + "${env:NAME} or ${file:path} instead",
                at: fieldNode.mark)
        }
        return true
    }

    /// The named account `node` gives, when it is a usable name.
    private func accountName(_ node: YAMLNode, in provider: MappingReader, of id: String) -> String? {
        guard let text = provider.scalarText(node, field: "account") else { return nil }
        guard isIdentifier(text.value) else {
            diagnostics.error(
                "`account` in provider `\(id)` may contain only ASCII letters, digits, '.', '_' and '-'; found "
                    + text.quoted, at: node.mark)
            return nil
        }
        return text.value
    }

    /// Hands the read fields to the type's factory; its refusal becomes a diagnostic at the field it names, with
    /// values that came from `${env:…}` or `${file:…}` named by their reference, never shown.
    private func configure(
        _ type: ProviderType, id: String, _ mark: YAMLMark, _ read: ReadFields, provider: MappingReader,
        typeNode: YAMLNode
    ) -> ProviderSpec? {
        let fields = ProviderFieldValues(read.values, environment: interpolator.environment)
        do {
            let configured = try type.configuration(from: fields)
            var spec = ProviderSpec(
                id: id, type: type.name, configured: configured, fields: fields, written: read.written,
                secretFields: type.fields.filter { $0.secret && read.values[$0.name] != nil }.map(\.name),
                maxValueBytes: nil, codec: nil, mark: mark)
            spec.unsetVariables = read.unsetVariables
            return spec
        } catch {
            // A value left unread may be what the factory refused: then it is needed, and its variable is named.
            if !read.unsetVariables.isEmpty {
                for unset in read.unsetVariables {
                    diagnostics.error(
                        "environment variable \(unset.variable) is not set; set it, or give a default with "
                            + "${env:\(unset.variable):-value}", at: unset.mark)
                }
                return nil
            }
            let message = read.written.values.sorted { $0.value.count > $1.value.count }.reduce(error.message) {
                $1.redacting($0)
            }
            diagnostics.error(
                "provider `\(id)`: \(message)", at: error.field.flatMap { provider[$0]?.mark } ?? typeNode.mark)
            return nil
        }
    }

    /// `a`, `a and b`, `a, b and c`.
    func listed(_ words: [String]) -> String {
        words.count < 2 ? words.joined() : words.dropLast().joined(separator: ", ") + " and " + words.last!
    }
}
