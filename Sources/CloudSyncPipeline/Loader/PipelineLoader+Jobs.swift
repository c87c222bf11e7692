import CloudSync
import CloudSyncBackup
import CloudSyncJQ
import CloudSyncYAML
import Foundation

/// Reading `jobs`: each job's type, the fields every job has, its `needs`, and the fields its type declares.
extension PipelineReader {
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
            let value = jobField(
                field, node, in: job, context: context, providerIDs: providerIDs, codecIDs: codecIDs,
                directory: directory)
            if let value { values[field.name] = value } else { valid = false }
        }
        return valid ? JobFieldValues(values) : nil
    }

    /// One job field read and checked by its kind; nil when it is wrong (its error reported).
    private func jobField(
        _ field: JobField, _ node: YAMLNode, in job: MappingReader, context: String, providerIDs: DeclaredIDs?,
        codecIDs: DeclaredIDs, directory: String
    ) -> JobFieldValue? {
        switch field.kind {
        case .provider, .providerOrStore, .providerOrAll:
            guard let text = job.scalarText(node, field: field.name) else { return nil }
            let word = field.kind == .providerOrStore ? "store" : field.kind == .providerOrAll ? "all" : nil
            let known = text.value == word || reference(text, at: node.mark, among: providerIDs, what: "provider")
            return known ? .text(text.value) : nil
        case .providers:
            guard let listed = job.textList(field.name) else { return nil }
            let known = listed.filter { reference($0.text, at: $0.mark, among: providerIDs, what: "provider") }
            return known.count == listed.count ? .list(known.map(\.text.value)) : nil
        case .codec:
            guard let text = job.scalarText(node, field: field.name),
                reference(text, at: node.mark, among: codecIDs, what: "codec")
            else { return nil }
            return .text(text.value)
        case .keys:
            return job.textList(field.name).flatMap { keyPatterns($0, field: field.name, context: context) }
        case .path:
            return job.path(field.name).map {
                .path(Interpolated(value: resolvePath($0.value, against: directory), written: $0.written))
            }
        case .boolean:
            return job.boolean(field.name).map { .boolean($0) }
        case .fraction:
            return job.number(field.name, in: 0...1).map { .number($0) }
        case .count(let range):
            guard let number = job.integer(field.name, minimum: Int64(range.lowerBound)) else { return nil }
            guard number <= Int64(range.upperBound) else {
                diagnostics.error(
                    "`\(field.name)` in \(context) must be at most \(range.upperBound); found \(number)", at: node.mark)
                return nil
            }
            return .number(Double(number))
        case .choice(let options):
            return job.choice(field.name, among: options).map { .text($0.value) }
        case .text:
            return job.scalarText(node, field: field.name).map { .text($0.value) }
        case .words:
            return job.textList(field.name).map { .list($0.map(\.text.value)) }
        case .keepPolicy:
            return keepPolicy(node, field: field.name, context: context).map { .keepPolicy($0) }
        case .rename:
            return rename(node, field: field.name, context: context).map { .rename($0) }
        case .jqProgram:
            return jqProgram(node, in: job, field: field.name, context: context).map { .text($0) }
        case .deleteLimit:
            guard let text = job.scalarText(node, field: field.name) else { return nil }
            guard let limit = DeleteLimit(text: text.value) else {
                diagnostics.error(
                    "`\(field.name)` in \(context) must be a whole number of keys (at least 0) or a "
                        + "percentage from 0% to 100% like \"50%\"; found \(text.quoted)", at: node.mark)
                return nil
            }
            return .deleteLimit(limit)
        }
    }

    /// Key globs: every one checked, each malformed one reported at its place.
    func keyPatterns(_ patterns: [(text: Interpolated, mark: YAMLMark)], field: String, context: String)
        -> JobFieldValue?
    {
        var wellFormed = true
        for pattern in patterns {
            do throws(Glob.SyntaxError) {
                _ = try Glob(pattern.text.value)
            } catch {
                wellFormed = false
                diagnostics.error(
                    "`\(field)` in \(context): \(pattern.text.redacting(error.message))", at: pattern.mark)
            }
        }
        return wellFormed ? .list(patterns.map(\.text.value)) : nil
    }

    /// A jq program, compiled here so one that does not compile is an error at its place, with jq's message.
    func jqProgram(_ node: YAMLNode, in job: MappingReader, field: String, context: String) -> String? {
        guard let text = job.scalarText(node, field: field) else { return nil }
        do throws(JQError) {
            _ = try JQProgram(text.value)
        } catch {
            diagnostics.error(
                "`\(field)` in \(context) is not a jq program cloudsync can run: \(error.message)", at: node.mark)
            return nil
        }
        return text.value
    }

    /// A rename mapping: `from` and `to`, both required, checked as a ``KeyRename`` (the error at `to`).
    func rename(_ node: YAMLNode, field: String, context: String) -> KeyRename? {
        let place = "`\(field)` in \(context)"
        guard let rename = mapping(node, place, ["from", "to"]), let fromNode = rename.require("from"),
            let toNode = rename.require("to"), let from = rename.scalarText(fromNode, field: "from"),
            let to = rename.scalarText(toNode, field: "to")
        else { return nil }
        do throws(KeyRename.Problem) {
            return try KeyRename(from: from.value, to: to.value)
        } catch {
            diagnostics.error("\(place): \(error.message)", at: toNode.mark)
            return nil
        }
    }

    /// A `keep` mapping: counts of at least 1, `within` a duration, and at least one rule.
    func keepPolicy(_ node: YAMLNode, field: String, context: String) -> KeepPolicy? {
        let place = "`\(field)` in \(context)"
        guard let rules = mapping(node, place, KeepPolicy.ruleNames) else { return nil }
        var policy = KeepPolicy()
        var valid = true
        let counts: [(String, WritableKeyPath<KeepPolicy, Int>)] = [
            ("last", \.last), ("hourly", \.hourly), ("daily", \.daily), ("weekly", \.weekly),
            ("monthly", \.monthly), ("yearly", \.yearly),
        ]
        for (name, path) in counts where rules[name] != nil {
            if let count = rules.integer(name, minimum: 1, unit: " of snapshots") {
                policy[keyPath: path] = Int(count)
            } else {
                valid = false
            }
        }
        if let within = rules["within"], let text = rules.scalarText(within, field: "within") {
            if let span = KeepPolicy.Span(text.value) {
                policy.within = span
            } else {
                valid = false
                diagnostics.error(
                    "`within` in \(place) must be a duration like 30d, 12h, 2w or 1y6m (units y, m, w, d, h); found "
                        + text.quoted, at: within.mark)
            }
        }
        let unknown = node.mapping?.contains { !KeepPolicy.ruleNames.contains($0.key.scalar ?? "") } ?? false
        if valid && !unknown && policy.isEmpty {
            diagnostics.error(
                "\(place) keeps nothing, so forget would remove every snapshot; set at least one of "
                    + KeepPolicy.ruleNames.joined(separator: ", "), at: node.mark)
            return nil
        }
        return valid ? policy : nil
    }
}
