// Test fixture for tests that need a second process (see Tests/CloudSyncLocalTests):
//   outbox-writer OUTBOX.db        writes keys through a store whose only provider is offline, one at a time and in
//                                  batches, so each write lands in a durable outbox, and prints each key once its
//                                  write call has returned; the crash test kills it with SIGKILL at a random moment.
//   directory-writer ROOT          writes generation after generation of the same 200 keys (two batches of 100,
//                                  some keys in subdirectories) to a directory provider and prints "generation N"
//                                  once both of its batches have returned; the crash test kills it with SIGKILL.
//   sqlite-writer DB COUNT         writes COUNT keys to a SQLite provider in batches of 50, printing "done" at the end,
//                                  while the test reads the same file from its own process.
//   http-get URL                   sends one GET through HTTPClient over URLSessionTransport, as a provider would,
//                                  and prints the status and the body on stdout, or the error's code and message on
//                                  stderr (exit 1); the proxy tests run it with proxy variables set for it alone.
import CloudSync
import CloudSyncHTTP
import CloudSyncLocal
import CloudSyncTesting
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("cloudsync-test-fixture: \(message)\n".utf8))
    exit(64)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch (arguments.first, arguments.count) {
case ("outbox-writer", 2):
    let provider = FaultInjectingProvider(id: "offline")
    provider.fail(.set, with: CloudSyncError(.offline, "the network is down"))
    var options = StoreOptions()
    options.outbox = try Outbox(
        storage: SQLiteOutboxStorage(path: arguments[1]), limits: Outbox.Limits(maxEntries: 1_000_000))
    let store = try CloudStore(providers: [provider], options: options)
    var index = 0
    for round in 0..<1_000_000 {
        // One write at a time and batches of 2 to 8 in turn, so the kill lands in both kinds of call (a batch's
        // entries are stored in one transaction).
        let size = round % 2 == 0 ? 1 : 2 + round % 7
        let items = (index..<index + size).map {
            KeyValue("key.\($0)", "value \($0) " + String(repeating: "x", count: $0 % 300))
        }
        let results = try await store.multiSet(items)
        for (item, result) in zip(items, results) {
            guard (try? result.get())?.queued == ["offline"] else {
                fail("write of \(item.key) was not queued: \(result)")
            }
        }
        FileHandle.standardOutput.write(Data(items.map { "\($0.key)\n" }.joined().utf8))
        index += size
    }
case ("directory-writer", 2):
    let provider = try DirectoryProvider(id: "files", root: arguments[1])
    let keys = (0..<200).map { $0 % 3 == 0 ? "long.\($0)." + String(repeating: "k", count: 300) : "key.\($0)" }
    for generation in 1..<1_000_000 {
        for batch in [keys[..<100], keys[100...]] {
            let values = batch.map { KeyValue($0, GenerationValue.make(key: $0, generation: generation)) }
            for result in try await provider.set(values) { _ = try result.get() }
        }
        FileHandle.standardOutput.write(Data("generation \(generation)\n".utf8))
    }
case ("sqlite-writer", 3):
    guard let count = Int(arguments[2]) else { fail("COUNT must be a number") }
    let provider = try SQLiteProvider(id: "shared", path: arguments[1])
    for start in stride(from: 0, to: count, by: 50) {
        let batch = (start..<min(start + 50, count)).map { KeyValue("written.\($0)", "value \($0)") }
        let results = try await provider.set(batch)
        for result in results { _ = try result.get() }
    }
    FileHandle.standardOutput.write(Data("done\n".utf8))
case ("http-get", 2):
    guard let url = URL(string: arguments[1]) else { fail("not a URL: \(arguments[1])") }
    let transport = URLSessionTransport()
    let client = HTTPClient(
        transport: transport, context: ProviderContext(providerID: "fixture"),
        retryPolicy: RetryPolicy(maxAttempts: 1), timeout: .seconds(20))
    do {
        let response = try await client.send(HTTPRequest(method: .get, url: url))
        FileHandle.standardOutput.write(Data("\(response.status)\n".utf8) + response.body)
    } catch {
        FileHandle.standardError.write(Data("\(error.code): \(error.message)\n".utf8))
        exit(1)
    }
    transport.close()
default:
    fail(
        "usage: cloudsync-test-fixture outbox-writer OUTBOX.db | directory-writer ROOT | sqlite-writer DB COUNT | http-get URL"
    )
}
