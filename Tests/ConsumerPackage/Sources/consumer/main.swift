// swift-format-ignore-file
// (The documentation's examples below must stay exactly as it prints them, so the formatter leaves this file alone.)
//
// The Swift examples of README.md and docs/*.md, each copied verbatim between an "Example from FILE" and an "end of
// example" line (checked by scripts/check-consumer.sh), with the glue they take as given: providers named `primary` and `backup`, a `log`
// function, a `value`, a pipeline file. Built against the library products only, from outside the package, and run
// by `make test`, which checks what it prints.
import CloudSyncCrypto
import CloudSyncLocal
import CloudSyncTesting
import Foundation

let directory = try TemporaryDirectory(prefix: "cloudsync-consumer")
guard FileManager.default.changeCurrentDirectoryPath(directory.path) else { fatalError("cannot enter \(directory.path)") }
for folder in ["keys", "state", "pipelines"] {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
}
setenv("OLD_VAULT_PASSPHRASE", "last year's passphrase", 1)
@Sendable func log(_ message: Any) { FileHandle.standardError.write(Data("log: \(message)\n".utf8)) }
let primary = try SQLiteProvider(id: "primary", path: "state/primary.db")
let backup = FaultInjectingProvider(id: "backup")
let value = #"{"favourites":[1,2,3]}"#

// Example from docs/library.md: The library
import CloudSync

var options = StoreOptions()
options.writeMode = .mirror              // .failover (default) | .mirror
options.tiering = .auto                  // .auto (64 KB / 900 KB) | .thresholds(kvMaxBytes:recordMaxBytes:) | .off
options.timeout = .seconds(15)           // every provider call, the availability probe included
options.onError = { error in log(error) }

let store = try CloudStore(providers: [primary, backup], options: options)
try await store.set(#"{"theme":"dark"}"#, forKey: "settings.theme")
let theme = try await store.get("settings.theme")
// end of example
print("get: \(theme ?? "nil")")

do {
// Example from docs/encryption.md: Encryption at rest (CloudSyncCrypto)
try generateKeyFile(at: "keys/vault-2026.key")                  // 32 random bytes, base64, mode 0600; never overwrites
options.codec = try EnvelopeCodec(keys: [
    .keyFile(id: "k2026", path: "keys/vault-2026.key"),         // the first key encrypts
    .passphrase(id: "k2025", environmentVariable: "OLD_VAULT_PASSPHRASE"),  // the others still decrypt
])
let store = try CloudStore(providers: [primary, backup], options: options)  // a store reads its options once
let result = try await store.maintenance.rekey(provider: "backup")  // re-encrypt under the current key
let report = try await store.maintenance.verify(provider: "backup")  // which values fail to decode, and why
// end of example
print("rekey: \(result.copied.count) re-encrypted, \(result.failed.map(\.error.code.rawValue)) failed")
print("verify: \(report.checked) checked, \(report.ok) ok")
try await store.set("secret", forKey: "settings.private")
let stored = try await backup.get(["settings.private"])[0].get() ?? ""
print("backup holds: \(stored.hasPrefix("cs1:k2026:raw:") ? "an envelope" : stored)")
print("decoded: \(try await store.get("settings.private") ?? "nil")")
}

// The backup goes offline for one write, so the outbox has something to keep.
backup.fail(.set, with: CloudSyncError(.offline, "the network is down", provider: "backup"), times: 1)
do {
// Example from docs/library.md: The outbox
options.outbox = try Outbox(
    storage: SQLiteOutboxStorage(path: "state/outbox.db"),      // or InMemoryOutboxStorage()
    limits: Outbox.Limits(maxEntries: 1000, maxAttempts: 12, maxAge: .seconds(7 * 24 * 3600)),
    onDropped: { entry, reason in log("gave up on \(entry.key): \(reason)") })
options.autoFlushInterval = .seconds(60)                         // optional; stopped by close()
let store = try CloudStore(providers: [primary, backup], options: options)

let receipt = try await store.set(value, forKey: "k")            // receipt.queued names providers it waits for
let result = try await store.flushOutbox()                        // drained / remaining / dropped
let pending = store.pendingWrites()                               // value as written, key, operation, provider, attempts, times, last error
store.discardPendingWrites { $0.key == "stuck" }                  // or all of them
// end of example
print("queued: \(receipt.queued), flush remaining: \(result.remaining), pending: \(pending.map(\.key))")
print("outbox file: \(try SQLiteOutboxStorage(path: "state/outbox.db").loadAll().map(\.provider))")
}

do {
try FileManager.default.createDirectory(atPath: "photos", withIntermediateDirectories: true)
try FileManager.default.createDirectory(atPath: "downloads", withIntermediateDirectories: true)
try Data("meow!".utf8).write(to: URL(fileURLWithPath: "photos/cat.jpg"))
// Example from docs/library.md: Files under keys
let files = try CloudStore(providers: [try DirectoryProvider(id: "files", root: "state/files")])
let receipt = try await files.putFile("photos/2026/cat.jpg", from: "photos/cat.jpg")  // streamed from the file
let got = try await files.getFile("photos/2026/cat.jpg", to: "downloads/cat.jpg")     // nil when no provider has it
try await files.remove("photos/2026/cat.jpg")                                        // a file is a key like any other
// end of example
let back = try String(contentsOfFile: "downloads/cat.jpg", encoding: .utf8)
print("files: \(receipt.providers) \(receipt.size) bytes, back: \(got?.size ?? -1) \(back)")
}

try """
    version: 1
    name: nightly
    providers:
      primary: { type: sqlite, path: ../state/primary.db }
      backup: { type: directory, path: ../state/backup, create: true }
    store:
      providers: [primary, backup]
      writeMode: mirror
    jobs:
      - { type: sync }
      - { type: verify, name: check, provider: backup }

    """.write(toFile: "pipelines/nightly.yaml", atomically: true, encoding: .utf8)

// Example from docs/pipeline-reference.md: Pipeline files
import CloudSyncPipeline
import CloudSyncRunner

let spec = try PipelineLoader.load(path: "pipelines/nightly.yaml", registry: BuiltInProviders.registry)
// a PipelineError renders every file:line:col
let pipeline = try PipelineCompiler.compile(spec, environment: ProcessInfo.processInfo.environment)
print(spec.store.providers, spec.jobs.map(\.name), pipeline.storeOptions.writeMode)  // nothing opened yet
// end of example

/// The glue the provider example takes as given: a notes service, here kept in memory.
struct NotesProvider: ForwardingProvider {
    let wrapped: any Provider
    init(id: String, _ configuration: NotesProviderFactory.Configuration, metrics: ProviderMetrics, state: ProviderState) {
        wrapped = MemoryProvider(id: id, metrics: metrics)
    }
}

// Example from docs/writing-a-provider.md: Writing a provider
struct NotesProviderFactory: ProviderFactory {
    struct Configuration: Sendable { var folder: String; var token: String }
    var type: String { "notes" }
    var summary: String { "one note per key in a notes service" }
    var fields: [ProviderField] {
        [
            ProviderField("folder", .text, required: true, summary: "the folder holding the notes"),
            ProviderField("token", .text, required: true, secret: true, summary: "the API token"),
        ]
    }
    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        Configuration(folder: values.text("folder") ?? "", token: values.text("token") ?? "")
    }
    func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities(batchLimit: 50) }
    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        NotesProvider(id: context.providerID, configuration, metrics: context.metrics, state: context.state)
    }
}

var registry = BuiltInProviders.registry     // or ProviderRegistry() for only your own
registry.register(NotesProviderFactory())
// end of example
print("types: \(registry.types.map(\.name))")

do {
// Example from docs/library.md: Pipelines from Swift
let spec = try PipelineLoader.load(path: "pipelines/nightly.yaml", registry: registry)   // with your own types
let compiled = try PipelineCompiler.compile(spec, environment: ProcessInfo.processInfo.environment)
let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()   // cancel its task to stop it
print(outcome.status, outcome.report.jobs.map(\.status.rawValue))               // ok ["ok", "ok"]
// end of example
}

// Example from docs/writing-a-job.md: Writing a job type
import CloudSyncJobs

struct CountJob: JobType {
    struct Configuration: Sendable { var provider: String; var prefix: String }
    static let counted = JobCount("counted", "keys under the prefix")

    let name = "count"
    let summary = "count the keys under a prefix in one provider"
    let fields = [
        JobField("provider", .provider, required: true, summary: "the provider whose keys are counted"),
        JobField("prefix", .text, defaultValue: "", summary: "only keys that start with it"),
    ]
    let counts = [counted]

    func configuration(from values: JobFieldValues) throws(JobConfigurationError) -> Configuration {
        Configuration(provider: values.text("provider") ?? "", prefix: values.text("prefix") ?? "")
    }
    func providers(of configuration: Configuration, store: [String]) -> [String] { [configuration.provider] }
    func plan(_ configuration: Configuration, paths: PlanPaths) -> String {
        "count the keys of \(configuration.provider) under \"\(configuration.prefix)\""
    }
    func run(_ configuration: Configuration, in context: JobContext, report: inout JobReport)
        async throws(CloudSyncError)
    {
        let provider = configuration.provider
        try await context.forEachPageInRange(of: provider, pageSize: context.pageSize(for: [provider])) { keys in
            report.add(keys.count(where: { $0.hasPrefix(configuration.prefix) }), to: Self.counted)
            return true
        }
    }
}

var jobTypes = BuiltInJobs.registry     // or JobRegistry() for only your own
jobTypes.register(CountJob())
// end of example

// Example from docs/writing-a-state-store.md: Writing a state store
import CloudSyncPipelineState
import CloudSyncRunner
import Synchronization

final class MemoryPipelineState: PipelineState {
    struct Tables {
        var runs: [RunRecord] = []  // newest first
        var identities: [String: String] = [:]  // by provider id
        var values: [String: String] = [:]  // by "provider/name"
        var cursors: [String: [String: String]] = [:]  // by job, then provider id
        var snapshots: [String: [StoreKey: SyncFingerprint]] = [:]
        var deletions: [String: Set<StoreKey>] = [:]
        var mirrors: [String: [StoreKey: MirrorRow]] = [:]
    }
    let tables = Mutex(Tables())

    func record(_ run: RunRecord) throws(CloudSyncError) { tables.withLock { $0.runs.insert(run, at: 0) } }
    func runs(limit: Int) throws(CloudSyncError) -> [RunRecord] { tables.withLock { Array($0.runs.prefix(limit)) } }
    func run(id: String) throws(CloudSyncError) -> RunRecord? { tables.withLock { $0.runs.first { $0.id == id } } }

    func identity(of provider: String) throws(CloudSyncError) -> String? {
        tables.withLock { $0.identities[provider] }
    }
    func remember(identity: String, of provider: String, at time: String) throws(CloudSyncError) {
        tables.withLock { $0.identities[provider] = identity }
    }
    func value(provider: String, name: String) throws(CloudSyncError) -> String? {
        tables.withLock { $0.values[provider + "/" + name] }
    }
    func setValue(_ value: String?, provider: String, name: String) throws(CloudSyncError) {
        tables.withLock { $0.values[provider + "/" + name] = value }
    }

    func hasSynced(_ job: String) throws(CloudSyncError) -> Bool { tables.withLock { $0.cursors[job] != nil } }
    func markSynced(_ job: String, at time: String, cursors: [String: String]?) throws(CloudSyncError) {
        tables.withLock { $0.cursors[job] = cursors ?? $0.cursors[job] ?? [:] }
    }
    func syncCursors(of job: String) throws(CloudSyncError) -> [String: String] {
        tables.withLock { $0.cursors[job] ?? [:] }
    }
    func snapshotRows(of job: String, keys: [String]) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        tables.withLock { tables in keys.compactMap { key in tables.snapshots[job]?[StoreKey(key)].map { (key, $0) } } }
    }
    func snapshotRows(of job: String, after key: String?, limit: Int) throws(CloudSyncError)
        -> [(key: String, fingerprint: SyncFingerprint)]
    {
        tables.withLock { tables in
            let rows = tables.snapshots[job, default: [:]].filter { key == nil || $0.key > StoreKey(key ?? "") }
            return rows.sorted { $0.key < $1.key }.prefix(limit).map { ($0.key.string, $0.value) }
        }
    }
    func snapshotCount(of job: String) throws(CloudSyncError) -> Int { tables.withLock { $0.snapshots[job]?.count ?? 0 } }
    func updateSnapshot(of job: String, _ rows: [(key: String, fingerprint: SyncFingerprint?)]) throws(CloudSyncError) {
        try recordSyncProgress(of: job, snapshot: rows, deletions: [])
    }
    func recordSyncProgress(
        of job: String, snapshot rows: [(key: String, fingerprint: SyncFingerprint?)], deletions: [String]
    ) throws(CloudSyncError) {
        tables.withLock { tables in  // at once: one lock for both
            for row in rows { tables.snapshots[job, default: [:]][StoreKey(row.key)] = row.fingerprint }
            tables.deletions[job, default: []].formUnion(deletions.map { StoreKey($0) })
        }
    }
    func clearDeletions(of job: String) throws(CloudSyncError) { tables.withLock { $0.deletions[job] = nil } }
    func deletions(of job: String, after key: String?, limit: Int) throws(CloudSyncError) -> [SyncItem] {
        tables.withLock { tables in
            let keys = tables.deletions[job, default: []].filter { key == nil || $0 > StoreKey(key ?? "") }
            return keys.sorted().compactMap { deleted in
                tables.snapshots[job]?[deleted].map { SyncItem(key: deleted.string, baseline: $0) }
            }.prefix(limit).map { $0 }
        }
    }

    func mirrorRows(of job: String, keys: [String]) throws(CloudSyncError) -> [StoreKey: MirrorRow] {
        tables.withLock { tables in
            var rows: [StoreKey: MirrorRow] = [:]
            for key in keys { rows[StoreKey(key)] = tables.mirrors[job]?[StoreKey(key)] }
            return rows
        }
    }
    func updateMirrorRows(of job: String, _ rows: [(key: String, row: MirrorRow?)]) throws(CloudSyncError) {
        tables.withLock { tables in for (key, row) in rows { tables.mirrors[job, default: [:]][StoreKey(key)] = row } }
    }

    let outbox = InMemoryOutboxStorage()  // writes no provider took yet
    func outboxStorage() throws -> any OutboxStorage { outbox }
    func outboxEntries() throws -> [OutboxEntry] { try outbox.loadAll() }

    func close() {}  // the state outlives each opening: the store keeps it
}

final class MemoryStateStore: PipelineStateStore {
    let states = Mutex<[String: MemoryPipelineState]>([:])  // by pipeline name
    let locked = Mutex<Set<String>>([])  // pipelines a command holds

    func keeps(_ spec: PipelineSpec) -> Bool { spec.sharedState == nil }
    func location(of spec: PipelineSpec) -> String { "this process's memory (pipeline \(spec.name))" }

    func open(_ compiled: CompiledPipeline, access: StateAccess) throws(RunRefusal) -> OpenedState? {
        let name = compiled.spec.name
        guard access != .join else {
            throw RunRefusal.cannotStart(CloudSyncError(.config, "a state in memory cannot be joined"))
        }
        let creates = if case .write = access { true } else { false }
        let found = states.withLock { states in
            if creates, states[name] == nil { states[name] = MemoryPipelineState() }
            return states[name]
        }
        guard let state = found else { return nil }
        guard access != .read else { return OpenedState(state: state, lock: nil) }
        guard locked.withLock({ $0.insert(name).inserted }) else {
            throw RunRefusal.locked(pid: nil, lockFile: location(of: compiled.spec))
        }
        return OpenedState(state: state, lock: MemoryRunLock { self.locked.withLock { _ = $0.remove(name) } })
    }
}

struct MemoryRunLock: HeldRunLock {
    let unlock: @Sendable () -> Void
    func release() { unlock() }
}

var stateStores = StateStoreRegistry()
stateStores.register(PostgresStateStore())   // pipelines that declare `state: { postgresql: … }`
stateStores.register(MemoryStateStore())     // every other one
var runOptions = RunOptions()
runOptions.stateStores = stateStores        // PipelineHistory and PipelineCredentials take `stores:` too
// end of example

try """
    version: 1
    name: counting
    providers:
      primary: { type: sqlite, path: ../state/primary.db }
    store:
      providers: [primary]
    jobs:
      - { type: count, provider: primary, prefix: "settings." }

    """.write(toFile: "pipelines/counting.yaml", atomically: true, encoding: .utf8)
do {
    let spec = try PipelineLoader.load(path: "pipelines/counting.yaml", registry: registry, jobTypes: jobTypes)
    let compiled = try PipelineCompiler.compile(spec, environment: [:])
    print("plan: \(spec.jobs.map { $0.job.plan(paths: PlanPaths(directory: spec.directory)) })")
    var counted: [Int] = []
    for _ in 0..<2 {
        let outcome = try await PipelineRunner(compiled, options: runOptions).run()
        counted += outcome.report.jobs.map { $0.counts["counted"] ?? -1 }
    }
    let history = try PipelineHistory.runs(of: compiled, limit: 10, stores: stateStores)
    let onDisk = FileManager.default.fileExists(atPath: spec.state + "/state.db")
    print("count: \(counted), runs kept in memory: \(history.count), state.db on disk: \(onDisk)")
}

await primary.close()
let primaryFiles = try FileManager.default.contentsOfDirectory(atPath: "state").filter { $0.hasPrefix("primary") }
print("after close: \(await primary.availability().reason.map(\.rawValue) ?? "available"), primary files: \(primaryFiles.sorted())")
