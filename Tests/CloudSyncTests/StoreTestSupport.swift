import CloudSync
import CloudSyncTesting
import Synchronization

/// Capabilities of the providers the seed's examples use.
enum Kind {
    /// The iCloud key-value store: 64 KB tier, 64-byte keys.
    static let keyValue = ProviderCapabilities(tier: .keyValue, keyRules: KeyRule.iCloudKeyValue)
    /// CloudKit: 900 KB tier, record-name rules, batches of 200.
    static let record = ProviderCapabilities(tier: .record, keyRules: KeyRule.cloudKitRecordName, batchLimit: 200)
    /// Drive-like: whole files, no cap.
    static let file = ProviderCapabilities(reportsQuota: true)
}

func makeProvider(_ id: String, _ capabilities: ProviderCapabilities = Kind.file, totalBytes: Int64? = nil)
    -> FaultInjectingProvider
{
    FaultInjectingProvider(id: id, capabilities: capabilities, totalBytes: totalBytes)
}

func makeStore(
    _ providers: [any Provider], _ configure: (inout StoreOptions) -> Void = { _ in }
) throws -> CloudStore {
    var options = StoreOptions()
    options.timeout = nil
    configure(&options)
    return try CloudStore(providers: providers, options: options)
}

/// Reads a provider directly, bypassing the store.
func raw(_ provider: any Provider, _ key: String) async throws -> String? {
    try await provider.get([key])[0].get()
}

/// Collects what the store reports through `onError`.
final class ErrorLog: Sendable {
    private let errors = Mutex<[CloudSyncError]>([])
    var handler: @Sendable (CloudSyncError) -> Void { { error in self.errors.withLock { $0.append(error) } } }
    var all: [CloudSyncError] { errors.withLock { $0 } }
}

/// Records what an outbox gives up, and why.
final class DropLog: Sendable {
    private let drops = Mutex<[(entry: OutboxEntry, reason: Outbox.DropReason)]>([])
    var handler: @Sendable (OutboxEntry, Outbox.DropReason) -> Void {
        { entry, reason in self.drops.withLock { $0.append((entry, reason)) } }
    }
    var reasons: [Outbox.DropReason] { drops.withLock { $0.map(\.reason) } }
    var keys: [String] { drops.withLock { $0.map(\.entry.key) } }
}

/// An in-memory outbox with fixed jitter (the full wait) so schedules are exact.
func makeOutbox(
    _ limits: Outbox.Limits = Outbox.Limits(), drops: DropLog? = nil,
    storage: any OutboxStorage = InMemoryOutboxStorage()
) throws -> Outbox {
    try Outbox(storage: storage, limits: limits, backoff: Outbox.Backoff(jitter: { 1 }), onDropped: drops?.handler)
}

/// A codec that wraps values in brackets, so encoded and decoded values differ and sizes grow.
struct BracketCodec: ValueCodec {
    var tag = "enc"
    struct NotEncoded: Error, CustomStringConvertible {
        var description: String { "value is not bracketed" }
    }

    func encode(_ value: String, key: String) throws -> String { "[\(tag):\(key):\(value)]" }

    func decode(_ stored: String, key: String) throws -> String {
        let prefix = "[\(tag):\(key):"
        guard stored.hasPrefix(prefix), stored.hasSuffix("]") else { throw NotEncoded() }
        return String(stored.dropFirst(prefix.count).dropLast())
    }
}

let offline = CloudSyncError(.offline, "the network is down")
let signedOut = CloudSyncError(.notSignedIn, "nobody is signed in")
