import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// The manual pages: cloudsync(1), a page per subcommand (cloudsync-run(1), cloudsync-outbox-list(1), …) and
/// cloudsync-pipeline(5).
///
/// They are made from what `--help` is made from (the command specs) and from what the loader checks (the pipeline
/// schema and the provider and job registries), so a page cannot say something the binary does not do.
struct ManPages {
    /// One page: its name (`cloudsync-run`), section and roff text.
    struct Page: Equatable {
        let name: String
        let section: Int
        let text: String

        var fileName: String { "\(name).\(section)" }
    }

    let version: String
    let registry: ProviderRegistry
    let jobTypes: JobRegistry
    /// Where the installed documentation is, named in SEE ALSO.
    let documentation: String

    /// Every page: cloudsync(1), then the subcommands' in help order (a group's page before its members'), then
    /// cloudsync-pipeline(5).
    var all: [Page] {
        var pages = [tool]
        for command in Commands.all {
            pages.append(page(for: command))
            pages += command.subcommands.map(page(for:))
        }
        return pages + [pipeline]
    }

    /// The page `name` names: `cloudsync`, a subcommand (`run`, `outbox list`, `outbox-list`) or `pipeline`.
    func page(named name: String) -> Page? {
        let wanted = name.replacingOccurrences(of: " ", with: "-")
        let full = wanted.hasPrefix("cloudsync") ? wanted : "cloudsync-" + wanted
        return all.first { $0.name == full }
    }

    /// The names `page(named:)` takes, as a person types them.
    var names: [String] { all.map { $0.name == "cloudsync" ? $0.name : String($0.name.dropFirst("cloudsync-".count)) } }

    // MARK: - Pages

    private var tool: Page {
        var roff = header("cloudsync", 1, "User Commands")
        roff +=
            section("NAME") + "cloudsync \\- "
            + escape("run CloudSync pipeline files: sync, migration, quota audits and encrypted backups") + "\n"
        roff += section("SYNOPSIS") + ".B cloudsync\n.I subcommand\n[\\fIoptions\\fR]\n.br\n"
        roff += ".B cloudsync\n[\\fB\\-\\-version\\fR] [\\fB\\-\\-help\\fR]\n"
        roff += section("DESCRIPTION")
        roff += paragraph(
            "cloudsync compiles a pipeline file (YAML; see cloudsync-pipeline(5)) into one key-value store over several "
                + "storage providers (SQLite, a directory, S3, Google Drive, CloudKit) and runs its jobs: scheduled "
                + "syncs, migrations, quota audits and encrypted backups, each run ending in a JSON report.")
        roff += paragraph(
            "Every subcommand answers --help with its usage, options and exit codes. Results go to standard output "
                + "and messages for people to standard error; --json gives machines the same.")
        roff += section("COMMANDS")
        for command in Commands.all {
            for leaf in command.subcommands.isEmpty ? [command] : command.subcommands {
                roff += ".TP\n" + bold("cloudsync \(leaf.name)") + " " + escape(leaf.synopsis) + "\n"
                roff += escape(leaf.abstract) + " See\n.BR \(escape(pageName(leaf))) (1).\n"
            }
        }
        roff += section("OPTIONS")
        roff += ".TP\n\\fB\\-\\-version\\fR\nPrint the version and exit.\n"
        roff += ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\n" + escape(CommandSpec.helpOption.help) + "\n"
        roff += exitStatus(CommandLineTool.exitCodes)
        roff += section("ENVIRONMENT")
        roff += term("NO_COLOR", "when set, progress is printed as plain lines instead of one line redrawn in place.")
        roff += term(
            "https_proxy, http_proxy, ALL_PROXY, NO_PROXY",
            "the proxies cloud providers use, read as curl reads them.")
        roff += section("FILES")
        roff += term(
            ".cloudsync/NAME/",
            "the state directory of the pipeline NAME, beside its file, unless the file names another: the run "
                + "lock, run history, outbox, snapshots and tokens.")
        roff += term(
            "/etc/cloudsync/NAME.yaml",
            "the pipeline the systemd units cloudsync@NAME.service and cloudsync@NAME.timer run.")
        roff += seeAlso(
            Commands.all.flatMap { $0.subcommands.isEmpty ? [$0] : $0.subcommands }.map { (pageName($0), 1) }
                + [("cloudsync-pipeline", 5)])
        return Page(name: "cloudsync", section: 1, text: roff)
    }

    private func page(for command: CommandSpec) -> Page {
        let name = pageName(command)
        var roff = header(name, 1, "User Commands")
        roff += section("NAME") + escape(name) + " \\- " + escape(lowercasedFirst(command.abstract)) + "\n"
        roff += section("SYNOPSIS") + bold("cloudsync \(command.name)") + " " + escape(command.synopsis) + "\n"
        roff += section("DESCRIPTION") + paragraph(command.abstract)
        for text in command.discussion.components(separatedBy: "\n\n") where !text.isEmpty {
            roff += paragraph(text)
        }
        if !command.subcommands.isEmpty {
            roff += section("COMMANDS")
            for member in command.subcommands {
                roff += ".TP\n" + bold("cloudsync \(member.name)") + " " + escape(member.synopsis) + "\n"
                roff += escape(member.abstract) + " See\n.BR \(escape(pageName(member))) (1).\n"
            }
        }
        if !command.arguments.isEmpty {
            roff += section("ARGUMENTS")
            for argument in command.arguments { roff += term(argument.usage, argument.help) }
        }
        roff += section("OPTIONS")
        for option in command.allOptions {
            let names = (option.short.map { "\\fB\\-\(escape(String($0)))\\fR, " } ?? "") + bold(option.long)
            roff += ".TP\n" + names + (option.valueName.map { " \\fI\(escape($0))\\fR" } ?? "") + "\n"
            roff += escape(option.fullHelp) + "\n"
        }
        if !command.exitCodes.isEmpty { roff += exitStatus(command.exitCodes) }
        roff += seeAlso([("cloudsync", 1), ("cloudsync-pipeline", 5)])
        return Page(name: name, section: 1, text: roff)
    }

    private var pipeline: Page {
        var roff = header("cloudsync-pipeline", 5, "File Formats")
        roff += section("NAME") + "cloudsync\\-pipeline \\- " + escape("CloudSync pipeline files (YAML)") + "\n"
        roff += section("SYNOPSIS") + ".nf\n"
        roff +=
            escape(
                """
                version: 1
                name: NAME
                providers:
                  ID: { type: TYPE, ... }
                store: { providers: [ID, ...] }
                jobs:
                  - { type: TYPE, ... }
                """) + "\n.fi\n"
        roff += section("DESCRIPTION")
        roff += paragraph(
            "A pipeline file declares providers, codecs, the store over them and the jobs cloudsync run runs, in "
                + "file order. Relative paths resolve against the file's directory. Any scalar may hold ${env:NAME}, "
                + "${env:NAME:-default} or ${file:path} (the file's text without its trailing newline); $${ is a "
                + "literal ${. Secrets are given that way, never inline.")
        roff += paragraph(
            "cloudsync validate reports every mistake at once as file:line:col, with the line; cloudsync plan shows "
                + "what the file compiles to without touching a provider; cloudsync schema pipeline prints this "
                + "format as a JSON Schema, for editors.")
        roff += section("FIELDS")
        for (name, description) in schemaFields() { roff += term(name, description) }
        roff += section("PROVIDERS")
        roff += paragraph(
            "Each entry of providers has a type; the fields each type takes come from that type's own description.")
        roff += reference(PipelineReference.providerEntries(registry: registry))
        roff += section("JOBS")
        roff += paragraph(
            "Each entry of jobs has a type, an optional name (default: its position and type, like 2-migrate) and "
                + "optional needs; the other fields are its type's.")
        roff += reference(PipelineReference.jobEntries(jobTypes: jobTypes))
        roff += seeAlso([("cloudsync", 1), ("cloudsync-run", 1), ("cloudsync-validate", 1), ("cloudsync-plan", 1)])
        return Page(name: "cloudsync-pipeline", section: 5, text: roff)
    }

    /// The top-level fields of the pipeline schema and the fields of the objects under them, as `store.writeMode`,
    /// each with its description; `providers` and `jobs` are left to their registries' references.
    private func schemaFields() -> [(String, String)] {
        let json = PipelineSchema.json(registry: registry, jobTypes: jobTypes)
        guard let schema = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else {
            return []
        }
        let definitions = schema["$defs"] as? [String: Any] ?? [:]
        func resolve(_ node: [String: Any]) -> [String: Any] {
            guard let reference = node["$ref"] as? String, reference.hasPrefix("#/$defs/"),
                let target = definitions[String(reference.dropFirst("#/$defs/".count))] as? [String: Any]
            else { return node }
            return target.merging(node.filter { $0.key != "$ref" }) { _, own in own }
        }
        var fields: [(String, String)] = []
        func walk(_ node: [String: Any], path: String, depth: Int) {
            let node = resolve(node)
            if let description = node["description"] as? String, !path.isEmpty { fields.append((path, description)) }
            guard depth < 3 else { return }
            var branches = [node]
            for key in ["oneOf", "anyOf"] { branches += (node[key] as? [[String: Any]] ?? []).map(resolve) }
            for branch in branches {
                let properties = (branch["properties"] as? [String: Any] ?? [:]).sorted {
                    (depth == 0 ? topLevelOrder($0.key) : 0, $0.key) < (depth == 0 ? topLevelOrder($1.key) : 0, $1.key)
                }
                for (name, child) in properties {
                    guard let child = child as? [String: Any], !(depth == 0 && (name == "providers" || name == "jobs"))
                    else { continue }
                    walk(child, path: path.isEmpty ? name : path + "." + name, depth: depth + 1)
                }
                if let items = branch["additionalProperties"] as? [String: Any] {
                    walk(items, path: path + ".<id>", depth: depth + 1)
                }
            }
        }
        walk(schema, path: "", depth: 0)
        var seen = Set<String>()
        return fields.filter { seen.insert($0.0).inserted }
    }

    /// Top-level fields in the order a file usually has them (JSON objects keep none); nested ones go alphabetically.
    private func topLevelOrder(_ name: String) -> Int {
        ["version", "name", "state", "schedule", "codecs", "store", "report"].firstIndex(of: name) ?? 99
    }

    private func reference(_ entries: [PipelineReference.Entry]) -> String {
        var roff = ""
        for entry in entries {
            if entry.heading {
                roff += ".SS \"\(escape(entry.term))\"\n" + paragraph(entry.meaning)
            } else {
                let takes = entry.takes.isEmpty ? "" : " (" + inline(entry.takes) + ")"
                roff += ".TP\n" + bold(entry.term) + takes + "\n" + inline(entry.meaning) + "\n"
            }
        }
        return roff
    }

    // MARK: - roff

    private func pageName(_ command: CommandSpec) -> String { "cloudsync-" + command.path.joined(separator: "-") }

    private func header(_ name: String, _ section: Int, _ manual: String) -> String {
        // No date: two builds of one version make the same pages.
        ".TH \"\(escape(name.uppercased()))\" \(section) \"\" \"cloudsync \(escape(version))\" \"\(manual)\"\n"
    }

    private func section(_ title: String) -> String { ".SH \(title)\n" }

    private func paragraph(_ text: String) -> String { ".PP\n" + inline(text) + "\n" }

    private func term(_ name: String, _ text: String) -> String { ".TP\n" + bold(name) + "\n" + inline(text) + "\n" }

    private func bold(_ text: String) -> String { "\\fB" + escape(text) + "\\fR" }

    private func exitStatus(_ codes: [(ExitCode, String)]) -> String {
        section("EXIT STATUS") + codes.map { term(String($0.0.rawValue), $0.1) }.joined()
    }

    private func seeAlso(_ pages: [(String, Int)]) -> String {
        var roff = section("SEE ALSO")
        roff += pages.map { ".BR \(escape($0.0)) (\($0.1))" }.joined(separator: ",\n") + "\n"
        roff += ".PP\nThe documentation in\n.IR \(escape(documentation)) ,\n"
        roff += "starting with README.md, and the JSON Schemas in its schemas directory.\n"
        return roff
    }

    /// `text` with its Markdown code spans in bold and everything else escaped.
    private func inline(_ text: String) -> String {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().map { index, piece in
            index % 2 == 1 ? bold(String(piece)) : escape(String(piece))
        }.joined()
    }

    /// `text` as roff prints it literally: backslashes and hyphens escaped, no line taken for a request, every
    /// character outside ASCII by its code point, and newlines kept.
    func escape(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            var out = line.first == "." || line.first == "'" ? "\\&" : ""
            for scalar in line.unicodeScalars {
                switch scalar {
                case "\\": out += "\\e"
                case "-": out += "\\-"
                case _ where scalar.isASCII: out.unicodeScalars.append(scalar)
                default: out += "\\[u" + String(format: "%04X", scalar.value) + "]"
                }
            }
            return out
        }.joined(separator: "\n")
    }

    /// A one-line summary as a NAME line takes it: first letter in lower case (unless the word is an acronym), no
    /// closing period.
    private func lowercasedFirst(_ text: String) -> String {
        let trimmed = text.hasSuffix(".") ? String(text.dropLast()) : text
        guard let first = trimmed.first, trimmed.dropFirst().first?.isLowercase ?? true else { return trimmed }
        return first.lowercased() + trimmed.dropFirst()
    }
}
