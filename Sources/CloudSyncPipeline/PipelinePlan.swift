import CloudSync
import Foundation

/// What a pipeline compiles to, for people (`cloudsync plan`) and machines (`--json`).
///
/// Holds key ids and paths as
/// written, never key material or interpolated values.
public struct PipelinePlan: Codable, Sendable, Equatable {
    /// One provider the file declares, in the store or not.
    public struct Provider: Codable, Sendable, Equatable {
        /// The provider's id in the file.
        public var id: String
        /// The registered provider type (`sqlite`, `directory`, ...).
        public var type: String
        /// 1-based place in the store's preference order; nil when the store does not use it.
        public var position: Int?
        /// The type's own fields as given: paths relative to the pipeline, interpolated values as written, secrets
        /// only by where they come from; plus what the type adds (an `s3` provider's `credentials` source).
        public var settings: [String: String]
        /// The largest encoded value it takes under this tiering, in bytes; nil for no cap.
        public var capBytes: Int?
        /// The key rules the provider's type imposes, as sentences, the non-empty rule first.
        public var keyRules: [String]
        /// The provider's own codec id; nil when it uses the store's.
        public var codec: String?
    }

    /// One codec the file declares: ids and where keys come from, never key material.
    public struct Codec: Codable, Sendable, Equatable {
        /// The codec's id in the file.
        public var id: String
        /// The cipher; always `xchacha20poly1305`.
        public var type: String
        /// Key ids, the current (encrypting) one first.
        public var keyIDs: [String]
        /// Where each key comes from, in ring order ("file keys/a.key", "environment variable NAME", ...): paths
        /// relative to the pipeline and interpolated values as written.
        public var keySources: [String]
        /// Whether values that are not envelopes are read as they are.
        public var allowPlaintext: Bool
    }

    /// The store's outbox settings.
    public struct Outbox: Codable, Sendable, Equatable {
        /// Whether failed writes are queued and retried.
        public var enabled: Bool
        /// The most entries kept.
        public var maxEntries: Int
        /// How many times an entry is tried before it is dropped.
        public var maxAttempts: Int
        /// How long an entry is kept before it is dropped, in milliseconds.
        public var maxAgeMs: Int64
        /// How often `cloudsync serve` flushes it between runs, in milliseconds; absent for never.
        public var autoFlushMs: Int64? = nil
    }

    /// The store the pipeline builds, with its settings described for people.
    public struct Store: Codable, Sendable, Equatable {
        /// The provider ids the store spans, in preference order.
        public var providers: [String]
        /// `failover` or `mirror`.
        public var writeMode: String
        /// The tiering with its thresholds in bytes, for example "auto (key-value stores 65536 bytes, records 921600
        /// bytes)".
        public var tiering: String
        /// The conflict resolver in words, for example "none (first value found)".
        public var resolver: String
        /// Whether resolving reads write the winner back.
        public var repairOnRead: Bool
        /// Whether keys are checked against every provider's rules before use.
        public var validateKeys: Bool
        /// The deadline of every provider call, in milliseconds; 0 for none.
        public var timeoutMs: Int
        /// Where the deadline came from when the file does not set it: `CLOUDSYNC_TIMEOUT_MS`; nil otherwise.
        public var timeoutFrom: String? = nil
        /// The codec id of providers without their own; nil for none.
        public var codec: String?
        /// The outbox settings.
        public var outbox: Outbox
        /// The key rules in force: those of every provider the store uses.
        public var keyRules: [String]
    }

    /// One job, in run order.
    public struct Job: Codable, Sendable, Equatable {
        /// The job's unique name (as written, or `<position>-<type>`).
        public var name: String
        /// The job type (`sync`, `migrate`, ...).
        public var type: String
        /// What the job will do, in one line for people, for example "copy a -> b, overwrite always, continue past
        /// failures".
        public var summary: String
        /// The jobs that must end `ok` before it runs; empty when it needs none.
        public var needs: [String]
    }

    /// One numbered migration, in the order they apply.
    public struct Migration: Codable, Sendable, Equatable {
        public var id: String
        public var description: String?
        /// The provider its rename and transform steps rewrite.
        public var on: String
        /// The SHA-256 of what its steps do, as the state records it once applied.
        public var checksum: String
        /// The provider keeping the backup taken before its first step; nil without one.
        public var backupTo: String?
        /// Each step in one line for people.
        public var steps: [String]
    }

    /// The pipeline's name.
    public var name: String
    /// The file's format version.
    public var version: Int
    /// The state directory, relative to the pipeline file when inside its directory; for a PostgreSQL state, its
    /// server and schema (never the URL, which may hold a password).
    public var state: String
    /// When the pipeline is due, and its next five slots.
    public struct Schedule: Codable, Sendable, Equatable {
        /// `cron "30 2 * * *" in Europe/Paris, jitter 5m` or `every 30s`.
        public var rule: String
        /// The next five slots after the plan was made, as ISO 8601 local times with their offset.
        public var next: [String]
    }
    /// Nil for a pipeline without `schedule:`.
    public var schedule: Schedule?
    /// Every provider the file declares, in file order.
    public var providers: [Provider]
    /// Every codec the file declares, in file order.
    public var codecs: [Codec]
    /// The store.
    public var store: Store
    /// The jobs, in run order.
    public var jobs: [Job]
    /// The numbered migrations, in the order a run applies them; nil when the file has none.
    ///
    /// A run applies, before the jobs, those its state does not record applied. The plan reads no state, so it does
    /// not say which those are.
    public var migrations: [Migration]?
    /// Where reports go, with `{name}` and `{startedAt}` still to fill in, relative to the pipeline file when inside
    /// its directory; nil when the file names none.
    public var report: String?
    /// What is worth knowing (a provider never available on this platform).
    public var warnings: [String]

    /// The plan of `compiled`, read from its spec and store options; opens nothing, reads no key and never copies an
    /// expanded or secret value.
    ///
    /// Its schedule's next slots are those after `now`.
    public init(_ compiled: CompiledPipeline, now: Date = Date()) {
        let spec = compiled.spec
        let tiering = compiled.storeOptions.tiering
        let relative = { (path: String) -> String in
            path.hasPrefix(spec.directory + "/") ? String(path.dropFirst(spec.directory.count + 1)) : path
        }
        let paths = PlanPaths(directory: spec.directory)
        let display = paths.display
        // As written: a name taken from the environment is shown as its reference, as every other value is.
        name = spec.writtenName ?? spec.name
        version = spec.version
        state = spec.sharedState?.description ?? relative(spec.state)
        schedule = spec.schedule.map { schedule in
            let formatter = ISO8601DateFormatter()
            if case .cron(_, let zone) = schedule.slots { formatter.timeZone = zone }
            return Schedule(
                rule: schedule.description, next: schedule.upcoming(after: now, count: 5).map(formatter.string(from:)))
        }
        providers = spec.providers.map { Self.provider($0, of: spec, tiering: tiering, display: display) }
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
        store = Self.store(of: spec)
        jobs = spec.jobs.map { Job(name: $0.name, type: $0.type, summary: $0.job.plan(paths: paths), needs: $0.needs) }
        migrations =
            spec.migrations.isEmpty
            ? nil
            : spec.migrations.map { migration in
                Migration(
                    id: migration.id, description: migration.description, on: migration.on,
                    checksum: migration.checksum, backupTo: migration.backup?.repository,
                    steps: migration.steps.map { Self.step($0, on: migration.on, paths: paths) })
            }
        report = spec.reportPath.map(relative)
        warnings = spec.warnings.map(\.message)
    }

    /// The migrations' part of ``text()``: each with its checksum, backup and steps; none without migrations.
    private var migrationLines: [String] {
        guard let migrations else { return [] }
        var lines = ["", "migrations (each applied once, in this order, before the jobs):"]
        for (place, migration) in migrations.enumerated() {
            lines.append(
                "  \(place + 1). \(migration.id) on \(migration.on)" + (migration.description.map { ": \($0)" } ?? "")
                    + " (checksum \(migration.checksum.prefix(12)))")
            if let backupTo = migration.backupTo { lines.append("     backed up first into \(backupTo)") }
            lines += migration.steps.enumerated().map { "     step \($0.offset + 1): \($0.element)" }
        }
        return lines
    }

    /// A migration's step in one line: a rename or transform within `on` as such, a copy as its job says.
    private static func step(_ step: JobSpec, on: String, paths: PlanPaths) -> String {
        let fields = step.job.fields
        guard fields.inPlace else { return step.job.plan(paths: paths) }
        if let rename = fields.rename("rename") {
            return "rename keys of \(on): \(rename)"
                + (fields.boolean("overwrite") == true ? ", replacing what a new name holds" : ", never replacing")
        }
        let keys = fields.list("keys").map { " keys \($0.joined(separator: ", "))" } ?? ""
        return "rewrite values of \(on)\(keys) by jq `\(fields.text("transform") ?? "")`"
    }

    /// One provider as the plan shows it: its settings with secrets replaced by where they come from, its place in
    /// the store, the largest value it takes and its key rules.
    private static func provider(
        _ provider: ProviderSpec, of spec: PipelineSpec, tiering: Tiering, display: (Interpolated) -> String
    ) -> Provider {
        let capabilities = provider.configured.capabilities
        var settings: [String: String] = [:]
        for (name, value) in provider.fields.values {
            if provider.secretFields.contains(name) {
                let given = provider.written[name]
                let unset = provider.unsetVariables.contains { $0.field == name }
                settings[name] = given?.isInterpolated == true || unset ? given!.display : "<secret given in the file>"
            } else if let given = provider.written[name] {
                settings[name] = display(given)
            } else if case .textMap(let pairs) = value {
                settings[name] = "\(pairs.count) item\(pairs.count == 1 ? "" : "s")"
            }
        }
        if let account = provider.account { settings["account"] = account + " (signs in with the named account)" }
        for (name, detail) in provider.configured.planDetails where settings[name] == nil {
            settings[name] = detail
        }
        return Provider(
            id: provider.id, type: provider.type,
            position: spec.store.providers.firstIndex(of: provider.id).map { $0 + 1 },
            settings: settings,
            capBytes: tiering.cap(
                tier: capabilities.tier, declared: capabilities.maxValueBytes, override: provider.maxValueBytes),
            keyRules: ([KeyRule.nonEmpty] + capabilities.keyRules).map(\.description), codec: provider.codec)
    }

    /// The store as the plan shows it: tiering and resolver in words, the key rules its providers impose.
    private static func store(of spec: PipelineSpec) -> Store {
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
        var store = Store(
            providers: storeSpec.providers, writeMode: storeSpec.writeMode.rawValue, tiering: tieringText,
            resolver: resolverText,
            repairOnRead: storeSpec.repairOnRead, validateKeys: storeSpec.validateKeys, timeoutMs: storeSpec.timeoutMs,
            codec: storeSpec.codec,
            outbox: Outbox(
                enabled: storeSpec.outbox.enabled, maxEntries: storeSpec.outbox.maxEntries,
                maxAttempts: storeSpec.outbox.maxAttempts, maxAgeMs: storeSpec.outbox.maxAgeMs,
                autoFlushMs: storeSpec.outbox.autoFlushMs),
            keyRules: rules)
        if storeSpec.timeoutFromEnvironment { store.timeoutFrom = PipelineReader.timeoutVariable }
        return store
    }

    /// Indented JSON with sorted keys, stable for pinning.
    public func json() -> String {
        String(decoding: (try? JSONEncoder.sorted.encode(self)) ?? Data(), as: UTF8.self) + "\n"
    }

    /// The plan as people read it.
    public func text() -> String {
        var lines = ["pipeline \(name) (version \(version)), state in \(state)"]
        if let schedule {
            lines += ["schedule: \(schedule.rule)", "  next: " + schedule.next.joined(separator: ", ")]
        }
        lines += ["", "providers (store order first):"]
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
            "  repair on read: \(store.repairOnRead)",
            "  timeout: \(store.timeoutMs > 0 ? "\(store.timeoutMs) ms" : "none")"
                + (store.timeoutFrom.map { " (\($0))" } ?? ""),
            "  codec: \(store.codec ?? "none")",
            "  outbox: "
                + (store.outbox.enabled
                    ? "\(store.outbox.maxEntries) entries, \(store.outbox.maxAttempts) attempts, \(store.outbox.maxAgeMs) ms"
                        + (store.outbox.autoFlushMs.map {
                            ", flushed by `serve` every " + DurationText.format(milliseconds: $0)
                        } ?? "")
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
        lines += migrationLines
        lines += ["", "jobs:"]
        lines +=
            jobs.isEmpty
            ? ["  (none)"]
            : jobs.enumerated().map { place, job in
                "  \(place + 1). \(job.name): \(job.summary)"
                    + (job.needs.isEmpty ? "" : " (after \(job.needs.joined(separator: ", ")) end ok)")
            }
        if let report { lines += ["", "report: \(report)"] }
        if !warnings.isEmpty { lines += [""] + warnings.map { "warning: \($0)" } }
        return lines.joined(separator: "\n") + "\n"
    }
}
