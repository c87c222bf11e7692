import CloudSync
import CloudSyncYAML
import Foundation

/// Reading `store`: the providers in order, write mode, tiering, resolver and outbox.
extension PipelineReader {
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
        let written = store.integer("timeoutMs", minimum: 1, unit: " of milliseconds").map(Int.init)
        let fromEnvironment = written == nil ? environmentTimeout(at: node.mark) : nil
        var spec = StoreSpec(
            providers: order, writeMode: writeMode, tiering: tieringSpec(store["tiering"]), resolver: resolver,
            repairOnRead: store.boolean("repairOnRead") ?? true, validateKeys: store.boolean("validateKeys") ?? true,
            timeoutMs: written ?? fromEnvironment ?? Int(StoreOptions.defaultTimeout.milliseconds), codec: codec,
            outbox: outboxSpec(store["outbox"]))
        spec.timeoutFromEnvironment = fromEnvironment != nil
        return spec
    }

    /// The variable that sets the store's deadline where the file sets none.
    static let timeoutVariable = "CLOUDSYNC_TIMEOUT_MS"

    /// The deadline `CLOUDSYNC_TIMEOUT_MS` sets, in milliseconds (0 for `none` or `0`: no deadline); nil when it is
    /// not set, and an error at the store for a value that is neither.
    ///
    /// An operator's setting, for a host where every pipeline needs another deadline (and for test suites on loaded
    /// machines); the report's `timeoutMs` and `cloudsync plan` say which deadline a run had, and where it came from.
    func environmentTimeout(at mark: YAMLMark) -> Int? {
        guard let text = interpolator.environment[Self.timeoutVariable] else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed == "none" { return 0 }
        guard let milliseconds = Int(trimmed), milliseconds >= 0 else {
            diagnostics.error(
                "\(Self.timeoutVariable) is `\(text)`: give the store's deadline in milliseconds (0 or `none` for no "
                    + "deadline), or unset it for the default of "
                    + "\(StoreOptions.defaultTimeout.milliseconds)",
                at: mark)
            return nil
        }
        return milliseconds
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
            let outbox = mapping(
                node, "store.outbox", ["enabled", "maxEntries", "maxAttempts", "maxAgeMs", "autoFlush"])
        else { return spec }
        spec.enabled = outbox.boolean("enabled") ?? true
        spec.maxEntries = Int(outbox.integer("maxEntries", minimum: 1) ?? Int64(Outbox.Limits.defaultMaxEntries))
        spec.maxAttempts = Int(outbox.integer("maxAttempts", minimum: 1) ?? Int64(Outbox.Limits.defaultMaxAttempts))
        spec.maxAgeMs =
            outbox.integer("maxAgeMs", minimum: 1, unit: " of milliseconds") ?? Outbox.Limits.defaultMaxAge.milliseconds
        if let flush = outbox["autoFlush"] { spec.autoFlushMs = autoFlush(flush, in: outbox) }
        return spec
    }

    /// `autoFlush: true` (every 60 s, the seed's timer), `false`, or `{ every: 30s }` (at least a second).
    private func autoFlush(_ node: YAMLNode, in outbox: MappingReader) -> Int64? {
        if node.scalar != nil { return outbox.boolean("autoFlush") == true ? 60_000 : nil }
        guard let fields = mapping(node, "store.outbox.autoFlush", ["every"]) else { return nil }
        guard let every = fields["every"] else {
            diagnostics.error("`autoFlush` needs `every` (such as 60s), or write `autoFlush: true`", at: node.mark)
            return nil
        }
        return duration(fields, every, field: "every", minimum: 1000)
    }
}
