import CloudSync
import CloudSyncJQ
import CloudSyncPipeline

/// `rename`, as `migrate` and `move` declare it.
let renameField = JobField(
    "rename", .rename,
    summary: "give copied keys new names: `from` is a pattern whose `*` each capture a run of characters, `to` names "
        + "them `{1}`, `{2}` (`{from: \"settings.*\", to: \"prefs.{1}\"}`); keys `from` does not match keep their "
        + "names, and a key whose new name another key could also take fails")

/// `transform`, as `migrate` and `move` declare it.
let transformField = JobField(
    "transform", .jqProgram,
    summary: "a jq program each value (JSON, after the source's codec decodes it) passes through before the "
        + "destination's codec encodes it; it must give one value, and a key it fails on is not written "
        + "(ERR_TRANSFORM)")

/// `filter`, as `migrate` and `move` declare it.
let filterField = JobField(
    "filter", .jqProgram,
    summary: "a jq predicate on each value (JSON): keys whose value it gives false, null or nothing for are left "
        + "where they are and counted skipped")

/// How a copying job reshapes what it copies, as its file says.
struct ReshapeSpec: Sendable, Equatable {
    var rename: KeyRename?
    var transform: String?
    var filter: String?

    /// The reshape fields of a job's values.
    init(_ values: JobFieldValues) {
        rename = values.rename("rename")
        transform = values.text("transform")
        filter = values.text("filter")
    }

    /// Whether keys keep their names and values as they are (no `rename`, `filter` or `transform`).
    var reshapesNothing: Bool { rename == nil && transform == nil && filter == nil }

    /// What a plan line says of it: nothing when it reshapes nothing.
    var planText: String {
        var parts: [String] = []
        if let rename { parts.append("rename \(rename)") }
        if let filter { parts.append("filter by jq `\(filter)`") }
        if let transform { parts.append("transform by jq `\(transform)`") }
        return parts.isEmpty ? "" : ", " + parts.joined(separator: ", ")
    }

    /// The store's reshape for a run: jq programs in sandboxes of their own (their worker processes start with the
    /// first value).
    func reshape() throws(CloudSyncError) -> MigrationReshape {
        guard transform != nil || filter != nil else { return MigrationReshape(rename: rename) }
        do throws(JQError) {
            let values = JQValueReshaping(
                filter: try filter.map { program throws(JQError) in try JQSandbox(program: program) },
                transform: try transform.map { program throws(JQError) in try JQSandbox(program: program) })
            return MigrationReshape(rename: rename, values: values)
        } catch {
            throw CloudSyncError(.config, error.message)
        }
    }
}

/// Values filtered and transformed by jq programs, each run in a ``JQSandbox``.
struct JQValueReshaping: ValueReshaping {
    let filter: JQSandbox?
    let transform: JQSandbox?

    func reshape(_ values: [(key: String, value: String)]) async -> [Result<String?, CloudSyncError>] {
        var outcomes = values.map { Result<String?, CloudSyncError>.success($0.value) }
        if let filter {
            let results = await filter.run(values.map { Array($0.value.utf8) })
            for (index, result) in results.enumerated() {
                if let error = result.error {
                    outcomes[index] = .failure(failure(values[index].key, "its filter failed", error))
                } else if result.outputs.first.map({ $0 == "false" || $0 == "null" }) ?? true {
                    outcomes[index] = .success(nil)
                }
            }
        }
        guard let transform else { return outcomes }
        let kept = outcomes.indices.filter { (try? outcomes[$0].get()) != nil }
        let results = await transform.run(kept.map { Array(values[$0].value.utf8) })
        for (index, result) in zip(kept, results) {
            let key = values[index].key
            if let error = result.error {
                outcomes[index] = .failure(failure(key, "its transform failed", error))
            } else if result.outputs.count != 1 || result.more {
                let count = result.more ? "more than one value" : "no value"
                outcomes[index] = .failure(
                    failure(key, "its transform gave \(count)", "a transform must give exactly one value per key"))
            } else {
                outcomes[index] = .success(result.outputs[0])
            }
        }
        return outcomes
    }

    private func failure(_ key: String, _ what: String, _ message: String) -> CloudSyncError {
        CloudSyncError(
            .transform, "\(key) was not written: \(what): \(JQError.withoutValueExcerpts(message))", key: key)
    }
}
