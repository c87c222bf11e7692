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
        var unsetVariables: [UnsetVariable] = []
        for field in type.fields {
            guard let fieldNode = field.required ? provider.require(field.name) : provider[field.name] else {
                if field.required { valid = false }
                continue
            }
            switch field.kind {
            case .text, .path:
                let unsetBefore = interpolator.unset.found.count
                guard var text = provider.scalarText(fieldNode, field: field.name, deferrable: field.kind == .text)
                else {
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
                for (variable, at) in interpolator.unset.found.dropFirst(unsetBefore) {
                    unsetVariables.append(UnsetVariable(variable: variable, provider: id, field: field.name, mark: at))
                }
                if field.secret, !text.isInterpolated, !text.value.isEmpty,
                    interpolator.unset.found.count == unsetBefore
                {
                    diagnostics.mask(text.value)
                    diagnostics.warning(
                        "provider `\(id)` (\(type.name)): `\(field.name)` is a secret written in the file itself, where "
                            + "whoever reads the file, its backups or its history can read it; give it with "
                            + "${env:NAME} or ${file:path} instead",
                        at: fieldNode.mark)
                }
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
        var account: String?
        // A type with a field of its own named `account` (a storage account, say) keeps it; for the others it names
        // the account the provider signs in with.
        let accountNode = type.fields.contains { $0.name == "account" } ? nil : provider["account"]
        if let node = accountNode, let text = provider.scalarText(node, field: "account") {
            if isIdentifier(text.value) {
                account = text.value
            } else {
                diagnostics.error(
                    "`account` in \(context) may contain only ASCII letters, digits, '.', '_' and '-'; found "
                        + text.quoted, at: node.mark)
            }
        }
        guard valid else { return nil }
        let fields = ProviderFieldValues(values, environment: interpolator.environment)
        do {
            let configured = try type.configuration(from: fields)
            if let node = accountNode, configured.signIn == nil {
                diagnostics.error(
                    "\(context) (\(type.name)) signs in to no account, so `account` means nothing for it; remove it",
                    at: node.mark)
                return nil
            }
            var spec = ProviderSpec(
                id: id, type: type.name, configured: configured, fields: fields,
                written: written, secretFields: type.fields.filter { $0.secret && values[$0.name] != nil }.map(\.name),
                maxValueBytes: maxValueBytes, codec: codec, mark: mark)
            spec.account = account
            spec.unsetVariables = unsetVariables
            return spec
        } catch {
            // A value left unread may be what the factory refused: then it is needed, and its variable is named.
            if !unsetVariables.isEmpty {
                for unset in unsetVariables {
                    diagnostics.error(
                        "environment variable \(unset.variable) is not set; set it, or give a default with "
                            + "${env:\(unset.variable):-value}", at: unset.mark)
                }
                return nil
            }
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
}
