import CloudSync
import Foundation

/// docs/pipeline-reference.md's tables of provider and job types and their fields, made from the registered
/// descriptions; a test keeps the page's copies identical, so the documentation cannot drift from what the loader accepts.
public enum PipelineReference {
    /// One line of a reference: a field, or with `heading` a type that opens the fields after it.
    ///
    /// Text may hold Markdown code spans; each format (the docs' tables, the man page) renders them its own way.
    public struct Entry: Sendable, Equatable {
        public var term: String
        public var takes: String
        public var meaning: String
        /// True for the line naming a provider or job type, whose fields follow.
        public var heading: Bool
    }

    /// The provider reference: the `type` field and the fields of every type, then each type with its fields.
    public static func providerEntries(registry: ProviderRegistry) -> [Entry] {
        var entries = [
            Entry(
                term: "providers.<id>.type", takes: registry.types.map { "`\($0.name)`" }.joined(separator: " | "),
                meaning: "the provider type; ids are `[A-Za-z0-9._-]+`", heading: false)
        ]
        for field in ProviderType.commonFields {
            entries.append(
                Entry(
                    term: "providers.<id>.\(field.name)", takes: kind(field), meaning: "any type: \(meaning(field))",
                    heading: false))
        }
        for type in registry.types {
            entries.append(Entry(term: "type: \(type.name)", takes: "", meaning: type.summary, heading: true))
            for field in type.fields {
                entries.append(
                    Entry(
                        term: "providers.<id>.\(field.name)", takes: kind(field),
                        meaning: "`\(type.name)`: \(meaning(field))", heading: false))
            }
        }
        return entries
    }

    /// The job reference: the `type` field and the fields every job has, then each job type (what it does and its
    /// counts) with its fields.
    public static func jobEntries(jobTypes: JobRegistry) -> [Entry] {
        var entries = [
            Entry(
                term: "jobs[].type", takes: jobTypes.types.map { "`\($0.name)`" }.joined(separator: " | "),
                meaning: "the job type", heading: false)
        ]
        for (name, summary) in RegisteredJobType.commonFields {
            entries.append(
                Entry(
                    term: "jobs[].\(name)", takes: name == "needs" ? "job names" : "text",
                    meaning: "any type: \(summary)", heading: false))
        }
        for type in jobTypes.types {
            let counts = type.counts.map { "`\($0.name)` (\($0.summary))" }.joined(separator: ", ")
            entries.append(
                Entry(
                    term: "type: \(type.name)", takes: "", meaning: "\(type.summary). Counts: \(counts)", heading: true)
            )
            for field in type.fields {
                var meaning = field.summary
                if field.kind == .path { meaning += " (relative to the pipeline file)" }
                if field.required { meaning += "; required" }
                if let value = field.defaultValue { meaning += "; default `\(value)`" }
                entries.append(Entry(term: field.name, takes: kind(field), meaning: meaning, heading: false))
            }
        }
        return entries
    }

    /// One Markdown table: a row per provider type, then a row per field (common fields once, for every type).
    public static func providerTable(registry: ProviderRegistry) -> String {
        markdownTable(header: "| field | type | meaning |", providerEntries(registry: registry), boldHeadings: false)
    }

    /// One Markdown table: the fields every job has, then a row per job type (what it does and its counts) followed
    /// by a row per field of that type.
    public static func jobTable(jobTypes: JobRegistry) -> String {
        markdownTable(
            header: "| job type / field | takes | meaning |", jobEntries(jobTypes: jobTypes), boldHeadings: true)
    }

    private static func markdownTable(header: String, _ entries: [Entry], boldHeadings: Bool) -> String {
        var rows = [header, "| --- | --- | --- |"]
        for entry in entries {
            let term = entry.heading && boldHeadings ? "**`\(entry.term)`**" : "`\(entry.term)`"
            // A `|` inside a cell would end it: Markdown tables take it escaped.
            let takes = entry.takes.replacingOccurrences(of: " | ", with: " \\| ")
            rows.append("| \(term) |\(takes.isEmpty ? "" : " \(takes)") | \(entry.meaning) |")
        }
        return rows.joined(separator: "\n") + "\n"
    }

    private static func kind(_ field: JobField) -> String {
        switch field.kind {
        case .provider: return "provider id"
        case .providerOrStore: return "provider id | `store`"
        case .providerOrAll: return "provider id | `all`"
        case .providers: return "provider ids"
        case .codec: return "codec id"
        case .keys: return "glob(s)"
        case .path: return "path"
        case .boolean: return "boolean"
        case .fraction: return "number 0–1"
        case .count(let range): return "whole number \(range.lowerBound)–\(range.upperBound)"
        case .choice(let options): return options.map { "`\($0)`" }.joined(separator: " | ")
        case .deleteLimit: return "count | `\"P%\"`"
        case .text: return "text"
        case .words: return "word(s)"
        case .keepPolicy: return "keep rules"
        case .rename: return "`{from, to}`"
        case .jqProgram: return "jq program"
        }
    }

    private static func kind(_ field: ProviderField) -> String {
        switch field.kind {
        case .text: return "text"
        case .path: return "path"
        case .integer(let minimum, _): return "integer ≥ \(minimum)"
        case .boolean: return "boolean"
        case .choice(let options): return options.map { "`\($0)`" }.joined(separator: " | ")
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
