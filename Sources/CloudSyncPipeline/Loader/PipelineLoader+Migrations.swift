import CloudSync
import CloudSyncYAML

/// Reading `migrations`: numbered, applied-once rewrites of a key set, each a list of steps that are jobs.
extension PipelineReader {
    /// The step kinds a migration's step may be, each a mapping of one of these.
    static let migrationStepKinds = ["rename", "transform", "migrate"]

    func migrationSpecs(_ node: YAMLNode?, providerIDs: DeclaredIDs?, codecIDs: DeclaredIDs, directory: String)
        -> [MigrationSpec]
    {
        guard let node else { return [] }
        guard let items = node.sequence else {
            diagnostics.error("`migrations` must be a list of migrations; found \(describe(node))", at: node.mark)
            return []
        }
        var ids = Set<String>()
        var specs: [MigrationSpec] = []
        for (index, item) in items.enumerated() {
            let context = "migration \(index + 1)"
            guard let reader = mapping(item, context, ["id", "description", "on", "before", "steps"]),
                let idNode = reader.require("id"), let id = reader.scalarText(idNode, field: "id")?.value
            else { continue }
            guard isMigrationID(id) else {
                diagnostics.error(
                    "the id of \(context) may contain only ASCII letters, digits, '.', '_' and '-', starting with a "
                        + "letter or digit (it names the migration's plans in the state directory); found \"\(id)\"",
                    at: idNode.mark)
                continue
            }
            guard ids.insert(id).inserted else {
                diagnostics.error("two migrations have the id \"\(id)\"; ids must be unique", at: idNode.mark)
                continue
            }
            let place = "migration \(id)"
            // Steps are read even when `on` is wrong, so their own mistakes show in the same pass.
            let onNode = reader.require("on")
            let on = onNode.flatMap { reader.scalarText($0, field: "on") }
            let known = on.map { reference($0, at: onNode!.mark, among: providerIDs, what: "provider") } ?? false
            guard let stepsNode = reader.require("steps") else { continue }
            guard let stepItems = stepsNode.sequence, !stepItems.isEmpty else {
                diagnostics.error("`steps` in \(place) must be a list of at least one step", at: stepsNode.mark)
                continue
            }
            var steps: [JobSpec] = []
            for (number, stepNode) in stepItems.enumerated() {
                let step = migrationStep(
                    stepNode, name: "\(id) step \(number + 1)", on: on?.value ?? "", providerIDs: providerIDs,
                    codecIDs: codecIDs, directory: directory)
                if let step { steps.append(step) }
            }
            var backup: MigrationBackup?
            if let before = reader["before"] {
                backup = migrationBackup(
                    before, id: id, on: on?.value ?? "", steps: steps, providerIDs: providerIDs, codecIDs: codecIDs)
                if backup == nil { continue }
            }
            guard let on, known, steps.count == stepItems.count else { continue }
            specs.append(
                MigrationSpec(
                    id: id, description: reader.string("description")?.value, on: on.value, steps: steps,
                    backup: backup, mark: item.mark))
        }
        return specs
    }

    /// `before: { backup: { to, codec } }`: a backup of `on` before the first step, into the repository in `to`;
    /// every step must then write only `on`, whose snapshot is what an undo restores.
    private func migrationBackup(
        _ node: YAMLNode, id: String, on: String, steps: [JobSpec], providerIDs: DeclaredIDs?, codecIDs: DeclaredIDs
    ) -> MigrationBackup? {
        let place = "`before` of migration \(id)"
        guard let before = mapping(node, place, ["backup"]), let backupNode = before.require("backup"),
            let backup = mapping(backupNode, "`backup` in \(place)", ["to", "codec"]),
            let toNode = backup.require("to"), let to = backup.scalarText(toNode, field: "to"),
            reference(to, at: toNode.mark, among: providerIDs, what: "provider"),
            let codecNode = backup.require("codec"), let codec = backup.scalarText(codecNode, field: "codec"),
            reference(codec, at: codecNode.mark, among: codecIDs, what: "codec")
        else { return nil }
        for step in steps where step.job.fields.text("to") != on {
            diagnostics.error(
                "\(step.name) writes \(step.job.fields.text("to") ?? "?"), but the backup before migration \(id) is "
                    + "of \(on), so an undo could not restore it; copy into \(on) only, or drop `before`",
                at: step.mark)
            return nil
        }
        guard let backupType = jobTypes.type(named: "backup"), let restoreType = jobTypes.type(named: "restore")
        else { return nil }
        let values = JobFieldValues([
            "from": .text(on), "to": .text(to.value), "codec": .text(codec.value), "tags": .list(["migration", id]),
        ])
        do {
            let job = JobSpec(
                type: backupType.name, name: "\(id) backup", needs: [],
                job: try backupType.configuration(from: values), mark: node.mark)
            return MigrationBackup(job: job, repository: to.value, codec: codec.value, restoreType: restoreType)
        } catch {
            diagnostics.error("\(place): \(error.message)", at: toNode.mark)
            return nil
        }
    }

    /// A migration id names a directory of the state's: no separators, no dot first.
    private func isMigrationID(_ id: String) -> Bool {
        guard let first = id.unicodeScalars.first, first.properties.isASCIIHexDigit || first.properties.isAlphabetic
        else { return false }
        return isIdentifier(id)
    }

    /// One step: a mapping of one kind, read into the job that does it; nil when it is wrong (its error reported).
    private func migrationStep(
        _ node: YAMLNode, name: String, on: String, providerIDs: DeclaredIDs?, codecIDs: DeclaredIDs,
        directory: String
    ) -> JobSpec? {
        let kinds = Self.migrationStepKinds.joined(separator: ", ")
        guard let pairs = node.mapping, !pairs.isEmpty else {
            diagnostics.error(
                "\(name) must be a mapping of one of \(kinds), like { rename: { from: \"settings.*\", to: "
                    + "\"prefs.{1}\" } }; found \(describe(node))", at: node.mark)
            return nil
        }
        guard pairs.count == 1 else {
            let named = pairs.compactMap(\.key.scalar).joined(separator: ", ")
            diagnostics.error("\(name) gives \(named): one kind per step; give each a step of its own", at: node.mark)
            return nil
        }
        let kind = pairs[0].key.scalar ?? ""
        guard Self.migrationStepKinds.contains(kind) else {
            var message = "\(name) is of unknown kind \"\(kind)\"; expected one of \(kinds)"
            if let guess = closest(kind, among: Self.migrationStepKinds) { message += "; did you mean \(guess)?" }
            diagnostics.error(message, at: pairs[0].key.mark)
            return nil
        }
        let body = pairs[0].value
        let context = "`\(kind)` of \(name)"
        let values: JobFieldValues?
        let type: String
        switch kind {
        case "rename":
            type = "move"
            values = renameStep(body, context: context, on: on)
        case "transform":
            type = "migrate"
            values = transformStep(body, context: context, on: on)
        default:
            type = "migrate"
            guard let job = mapping(body, context, (jobTypes.type(named: type)?.fields ?? []).map(\.name)),
                let registered = jobTypes.type(named: type)
            else { return nil }
            values = jobFields(
                job, type: registered, context: context, providerIDs: providerIDs, codecIDs: codecIDs,
                directory: directory)
            if let shards = values?.number("shards"), shards > 1, let node = job["shards"] {
                diagnostics.error(
                    "\(context): a migration's step runs whole, planned and then applied by one runner; remove "
                        + "`shards`", at: node.mark)
                return nil
            }
        }
        guard let values, let registered = jobTypes.type(named: type) else { return nil }
        do {
            return JobSpec(
                type: type, name: name, needs: [], job: try registered.configuration(from: values), mark: body.mark)
        } catch {
            diagnostics.error("\(context): \(error.message)", at: body.mark)
            return nil
        }
    }

    /// `rename: { from, to, overwrite }` on `on`: a move within it of the keys `from` matches.
    private func renameStep(_ node: YAMLNode, context: String, on: String) -> JobFieldValues? {
        guard let reader = mapping(node, context, ["from", "to", "overwrite"]), let fromNode = reader.require("from"),
            let toNode = reader.require("to"), let from = reader.scalarText(fromNode, field: "from"),
            let to = reader.scalarText(toNode, field: "to")
        else { return nil }
        let rename: KeyRename
        do throws(KeyRename.Problem) {
            rename = try KeyRename(from: from.value, to: to.value)
        } catch {
            diagnostics.error("\(context): \(error.message)", at: toNode.mark)
            return nil
        }
        var values: [String: JobFieldValue] = ["from": .text(on), "to": .text(on), "rename": .rename(rename)]
        if reader["overwrite"] != nil {
            guard let overwrite = reader.boolean("overwrite") else { return nil }
            values["overwrite"] = .boolean(overwrite)
        }
        return JobFieldValues(values, inPlace: true)
    }

    /// `transform: { keys, jq }` on `on`: each selected value rewritten where it is.
    private func transformStep(_ node: YAMLNode, context: String, on: String) -> JobFieldValues? {
        guard let reader = mapping(node, context, ["keys", "jq"]), let jqNode = reader.require("jq"),
            let program = jqProgram(jqNode, in: reader, field: "jq", context: context)
        else { return nil }
        var values: [String: JobFieldValue] = ["from": .text(on), "to": .text(on), "transform": .text(program)]
        if reader["keys"] != nil {
            guard let listed = reader.textList("keys"), let keys = keyPatterns(listed, field: "keys", context: context)
            else { return nil }
            values["keys"] = keys
        }
        return JobFieldValues(values, inPlace: true)
    }
}
