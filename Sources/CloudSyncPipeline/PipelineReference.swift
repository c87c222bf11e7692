import CloudSync

/// The README's reference of provider types and their fields, made from the registered factories' descriptions; a
/// test keeps the README's copy identical, so the documentation cannot drift from what the loader accepts.
public enum PipelineReference {
    /// One Markdown table: a row per provider type, then a row per field (common fields once, for every type).
    public static func providerTable(registry: ProviderRegistry) -> String {
        var rows = [
            "| field | type | meaning |",
            "| --- | --- | --- |",
            "| `providers.<id>.type` | " + registry.types.map { "`\($0.name)`" }.joined(separator: " \\| ")
                + " | the provider type; ids are `[A-Za-z0-9._-]+` |",
        ]
        for field in ProviderType.commonFields {
            rows.append("| `providers.<id>.\(field.name)` | \(kind(field)) | any type: \(meaning(field)) |")
        }
        for type in registry.types {
            rows.append("| `type: \(type.name)` | | \(type.summary) |")
            for field in type.fields {
                rows.append("| `providers.<id>.\(field.name)` | \(kind(field)) | `\(type.name)`: \(meaning(field)) |")
            }
        }
        return rows.joined(separator: "\n") + "\n"
    }

    private static func kind(_ field: ProviderField) -> String {
        switch field.kind {
        case .text: return "text"
        case .path: return "path"
        case .integer(let minimum, _): return "integer ≥ \(minimum)"
        case .boolean: return "boolean"
        case .choice(let options): return options.map { "`\($0)`" }.joined(separator: " \\| ")
        case .textMap: return "map of text"
        }
    }

    private static func meaning(_ field: ProviderField) -> String {
        var text = field.summary
        if field.kind == .path { text += " (relative to the pipeline file)" }
        if field.required { text += "; required" }
        if let value = field.defaultValue { text += "; default `\(value)`" }
        if field.secret { text += "; a secret: give it with `${env:NAME}` or `${file:path}`, never shown" }
        return text
    }
}
