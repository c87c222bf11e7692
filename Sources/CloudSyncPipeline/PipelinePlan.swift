import CloudSync
import Foundation

/// What a pipeline compiles to, for people (`cloudsync plan`) and machines (`--json`).
///
/// Holds key ids and paths as
/// written, never key material or interpolated values.
public struct PipelinePlan: Codable, Sendable, Equatable {
    public struct Provider: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        /// 1-based place in the store's preference order; nil when the store does not use it.
        public var position: Int?
        /// The type's own fields as given: paths relative to the pipeline, interpolated values as written, secrets
        /// only by where they come from.
        public var settings: [String: String]
        /// The largest encoded value it takes under this tiering, in bytes; nil for no cap.
        public var capBytes: Int?
        public var keyRules: [String]
        public var codec: String?
    }

    public struct Codec: Codable, Sendable, Equatable {
        public var id: String
        public var type: String
        /// Key ids, the current (encrypting) one first.
        public var keyIDs: [String]
        public var keySources: [String]
        public var allowPlaintext: Bool
    }

    public struct Outbox: Codable, Sendable, Equatable {
        public var enabled: Bool
        public var maxEntries: Int
        public var maxAttempts: Int
        public var maxAgeMs: Int64
    }

    public struct Store: Codable, Sendable, Equatable {
        public var providers: [String]
        public var writeMode: String
        public var tiering: String
        public var resolver: String
        public var repairOnRead: Bool
        public var validateKeys: Bool
        public var timeoutMs: Int
        public var codec: String?
        public var outbox: Outbox
        /// The key rules in force: those of every provider the store uses.
        public var keyRules: [String]
    }

    public struct Job: Codable, Sendable, Equatable {
        public var name: String
        public var type: String
        public var summary: String
    }

    public var name: String
    public var version: Int
    public var state: String
    public var providers: [Provider]
    public var codecs: [Codec]
    public var store: Store
    public var jobs: [Job]
    public var report: String?

    public init(_ compiled: CompiledPipeline) {
        let spec = compiled.spec
        let tiering = compiled.storeOptions.tiering
        let relative = { (path: String) -> String in
            path.hasPrefix(spec.directory + "/") ? String(path.dropFirst(spec.directory.count + 1)) : path
        }
        let display = { (value: Interpolated) -> String in value.isInterpolated ? value.display : relative(value.value)
        }
        name = spec.name
        version = spec.version
        state = relative(spec.state)
        providers = spec.providers.map { provider in
            let capabilities = provider.configured.capabilities
            var settings: [String: String] = [:]
            for (name, value) in provider.fields.values {
                if provider.secretFields.contains(name) {
                    let given = provider.written[name]
                    settings[name] = given?.isInterpolated == true ? given!.display : "<secret given in the file>"
                } else if let given = provider.written[name] {
                    settings[name] = display(given)
                } else if case .textMap(let pairs) = value {
                    settings[name] = "\(pairs.count) item\(pairs.count == 1 ? "" : "s")"
                }
            }
            return Provider(
                id: provider.id, type: provider.type,
                position: spec.store.providers.firstIndex(of: provider.id).map { $0 + 1 },
                settings: settings,
                capBytes: tiering.cap(
                    tier: capabilities.tier, declared: capabilities.maxValueBytes, override: provider.maxValueBytes),
                keyRules: ([KeyRule.nonEmpty] + capabilities.keyRules).map(\.description), codec: provider.codec)
        }
        codecs = spec.codecs.map { codec in
            Codec(
                id: codec.id, type: "xchacha20poly1305", keyIDs: codec.keys.map(\.id),
                keySources: codec.keys.map { key in
                    switch key.source {
                    case .file(let path): return "file \(display(path))"
                    case .environment(let name): return "environment variable \(name)"
                    case .passphraseEnvironment(let name): return "passphrase from environment variable \(name)"
                    case .passphraseFile(let path): return "passphrase from file \(display(path))"
                    }
                }, allowPlaintext: codec.allowPlaintext)
        }
        let storeSpec = spec.store
        var rules = [KeyRule.nonEmpty.description]
        if storeSpec.validateKeys {
            for id in storeSpec.providers {
                guard let provider = spec.providers.first(where: { $0.id == id }) else { continue }
                for rule in provider.configured.capabilities.keyRules where !rules.contains(rule.description) {
                    rules.append(rule.description)
                }
            }
        }
        let tieringText: String
        switch storeSpec.tiering {
        case .auto:
            tieringText =
                "auto (key-value stores \(Tiering.defaultKVMaxBytes) bytes, records \(Tiering.defaultRecordMaxBytes) bytes)"
        case .off: tieringText = "off"
        case .thresholds(let kv, let record):
            tieringText = "thresholds (key-value stores \(kv) bytes, records \(record) bytes)"
        }
        let resolverText: String
        switch storeSpec.resolver {
        case .none: resolverText = "none (first value found)"
        case .timestamp(let field): resolverText = "timestamp (newest `\(field)` wins)"
        case .union(let id):
            resolverText = id.map { "union (elements identified by `\($0)`)" } ?? "union (whole elements)"
        }
        store = Store(
            providers: storeSpec.providers, writeMode: storeSpec.writeMode.rawValue, tiering: tieringText,
            resolver: resolverText,
            repairOnRead: storeSpec.repairOnRead, validateKeys: storeSpec.validateKeys, timeoutMs: storeSpec.timeoutMs,
            codec: storeSpec.codec,
            outbox: Outbox(
                enabled: storeSpec.outbox.enabled, maxEntries: storeSpec.outbox.maxEntries,
                maxAttempts: storeSpec.outbox.maxAttempts, maxAgeMs: storeSpec.outbox.maxAgeMs),
            keyRules: rules)
        jobs = spec.jobs.map { Job(name: $0.name, type: $0.type, summary: Self.summary($0.kind, display: display)) }
        report = spec.reportPath.map(relative)
    }

    static func summary(_ kind: JobSpec.Kind, display: (Interpolated) -> String) -> String {
        func keys(_ keys: [String]?) -> String { keys.map { " keys \($0.joined(separator: ", "))" } ?? "" }
        switch kind {
        case .sync(let providers):
            return "reconcile every key across " + (providers?.joined(separator: ", ") ?? "the store's providers")
        case .migrate(let from, let to, let filter, let continueOnError, let overwrite):
            return "copy \(from) -> \(to)\(keys(filter)), overwrite \(overwrite.rawValue)"
                + (continueOnError ? ", continue past failures" : ", stop at the first failure")
        case .clear(let provider, let confirm):
            return "remove every key from \(provider ?? "all providers")"
                + (confirm ? " (confirmed)" : " (needs --yes)")
        case .quota(let warnAbove, let failOnWarning):
            return "report space per provider" + (warnAbove.map { ", warn above \($0)" } ?? "")
                + (failOnWarning ? ", fail on warning" : "")
        case .export(let from, let path, let filter, let codec):
            return "write \(from)\(keys(filter)) to \(display(path))" + (codec.map { ", encrypted with \($0)" } ?? "")
        case .import(let path, let to, let overwrite):
            return "read \(display(path)) into \(to), overwrite \(overwrite.rawValue)"
        case .verify(let provider):
            return "check every value of \(provider) decodes"
        case .rekey(let provider):
            return "re-encrypt every value of \(provider) under the current key"
        case .flush:
            return "retry the outbox's due writes"
        }
    }

    /// Indented JSON with sorted keys, stable for pinning.
    public func json() -> String {
        String(decoding: (try? JSONEncoder.sorted.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }

    /// The plan as people read it.
    public func text() -> String {
        var lines = ["pipeline \(name) (version \(version)), state in \(state)", "", "providers (store order first):"]
        for provider in providers.sorted(by: { ($0.position ?? .max, $0.id) < ($1.position ?? .max, $1.id) }) {
            let place = provider.position.map { "\($0)." } ?? "-"
            var line = "  \(place) \(provider.id): \(provider.type)"
            if !provider.settings.isEmpty {
                line +=
                    " ("
                    + provider.settings.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(
                        separator: ", ") + ")"
            }
            line += ", cap " + (provider.capBytes.map { "\($0) bytes" } ?? "none")
            if let codec = provider.codec { line += ", codec \(codec)" }
            if provider.position == nil { line += " (not in the store)" }
            lines.append(line)
        }
        lines += [
            "", "store:", "  write mode: \(store.writeMode)", "  tiering: \(store.tiering)",
            "  resolver: \(store.resolver)",
            "  repair on read: \(store.repairOnRead)", "  timeout: \(store.timeoutMs) ms",
            "  codec: \(store.codec ?? "none")",
            "  outbox: "
                + (store.outbox.enabled
                    ? "\(store.outbox.maxEntries) entries, \(store.outbox.maxAttempts) attempts, \(store.outbox.maxAgeMs) ms"
                    : "off"),
            "  key rules: " + store.keyRules.joined(separator: "; "),
        ]
        if !codecs.isEmpty {
            lines += ["", "codecs:"]
            for codec in codecs {
                lines.append(
                    "  \(codec.id): \(codec.type), keys \(codec.keyIDs.joined(separator: ", ")) (current \(codec.keyIDs[0]))"
                        + (codec.allowPlaintext ? ", plaintext allowed" : ""))
            }
        }
        lines += ["", "jobs:"]
        lines +=
            jobs.isEmpty
            ? ["  (none)"] : jobs.enumerated().map { "  \($0.offset + 1). \($0.element.name): \($0.element.summary)" }
        if let report { lines += ["", "report: \(report)"] }
        return lines.joined(separator: "\n") + "\n"
    }
}
