import CloudSync

/// docs/pipeline-reference.md's tables of provider and job types and their fields, made from the registered
/// descriptions; a test keeps the page's copies identical, so the documentation cannot drift from what the loader accepts.
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

    /// One Markdown table: the fields every job has, then a row per job type (what it does and its counts) followed
    /// by a row per field of that type.
    public static func jobTable(jobTypes: JobRegistry) -> String {
        var rows = [
            "| job type / field | takes | meaning |",
            "| --- | --- | --- |",
            "| `jobs[].type` | " + jobTypes.types.map { "`\($0.name)`" }.joined(separator: " \\| ")
                + " | the job type |",
        ]
        for (name, summary) in RegisteredJobType.commonFields {
            rows.append("| `jobs[].\(name)` | \(name == "needs" ? "job names" : "text") | any type: \(summary) |")
        }
        for type in jobTypes.types {
            let counts = type.counts.map { "`\($0.name)` (\($0.summary))" }.joined(separator: ", ")
            rows.append("| **`type: \(type.name)`** | | \(type.summary). Counts: \(counts) |")
            for field in type.fields {
                var meaning = field.summary
                if field.kind == .path { meaning += " (relative to the pipeline file)" }
                if field.required { meaning += "; required" }
                if let value = field.defaultValue { meaning += "; default `\(value)`" }
                rows.append("| `\(field.name)` | \(kind(field)) | \(meaning) |")
            }
        }
        return rows.joined(separator: "\n") + "\n"
    }

    private static func kind(_ field: JobField) -> String {
        switch field.kind {
        case .provider: return "provider id"
        case .providerOrStore: return "provider id \\| `store`"
        case .providerOrAll: return "provider id \\| `all`"
        case .providers: return "provider ids"
        case .codec: return "codec id"
        case .keys: return "glob(s)"
        case .path: return "path"
        case .boolean: return "boolean"
        case .fraction: return "number 0–1"
        case .count(let range): return "whole number \(range.lowerBound)–\(range.upperBound)"
        case .choice(let options): return options.map { "`\($0)`" }.joined(separator: " \\| ")
        case .deleteLimit: return "count \\| `\"P%\"`"
        case .text: return "text"
        case .words: return "word(s)"
        case .keepPolicy: return "keep rules"
        }
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
