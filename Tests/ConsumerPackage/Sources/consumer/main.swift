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

await primary.close()
let primaryFiles = try FileManager.default.contentsOfDirectory(atPath: "state").filter { $0.hasPrefix("primary") }
print("after close: \(await primary.availability().reason.map(\.rawValue) ?? "available"), primary files: \(primaryFiles.sorted())")
