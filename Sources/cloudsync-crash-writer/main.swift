// Test fixture for the outbox crash test: writes keys through a store whose only provider is offline, so every
// write lands in a durable outbox, and prints each key once its write call has returned. The test kills it with
// SIGKILL at a random moment and checks that every printed key survived.
import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: cloudsync-crash-writer OUTBOX.db\n".utf8))
    exit(64)
}
let provider = FaultInjectingProvider(id: "offline")
provider.fail(.set, with: CloudSyncError(.offline, "the network is down"))
var options = StoreOptions()
options.outbox = try Outbox(
    storage: SQLiteOutboxStorage(path: arguments[1]), limits: Outbox.Limits(maxEntries: 1_000_000))
let store = try CloudStore(providers: [provider], options: options)
for index in 0..<1_000_000 {
    let receipt = try await store.set(
        "value \(index) " + String(repeating: "x", count: index % 300), forKey: "key.\(index)")
    guard receipt.queued == ["offline"] else { fatalError("write \(index) was not queued: \(receipt)") }
    FileHandle.standardOutput.write(Data("key.\(index)\n".utf8))
}
