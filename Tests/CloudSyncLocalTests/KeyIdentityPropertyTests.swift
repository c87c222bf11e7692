import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// A model-based run of keys that collide under every comparison but bytes.
///
/// Random interleavings of writes, removes, listings, outages and outbox flushes over a mirrored store of a SQLite
/// database, a directory and memory, with keys drawn to include canonically equivalent spellings, case twins and
/// non-ASCII. A model keyed by byte arrays (not by ``StoreKey``) says what every provider must hold; no key may be
/// lost or merged.
struct KeyIdentityModel {
    /// Pieces keys are made of: twins of `é` and `Å`, case pairs, a combining mark alone, an emoji, `/` and `.`.
    static let pieces = [
        "caf", "e", "E", "\u{E9}", "\u{301}", "\u{C5}", "A", "a", "\u{30A}", "\u{212B}", "/", ".", "\u{1F600}", "k",
    ]

    static func run(seed: UInt64, steps: Int) async throws -> [String] {
        var random = SeededRandom(seed: seed)
        let directory = try TemporaryDirectory()
        let sqlite = FaultInjectingProvider(try SQLiteProvider(id: "sqlite", path: directory.file("keys.db")))
        let files = FaultInjectingProvider(try DirectoryProvider(id: "files", root: directory.file("files")))
        let memory = FaultInjectingProvider(MemoryProvider(id: "memory"))
        let providers = [sqlite, files, memory]
        let clock = ManualClock()
        var options = StoreOptions()
        options.timeout = nil
        options.clock = clock
        options.writeMode = .mirror
        options.outbox = try Outbox(
            storage: InMemoryOutboxStorage(), limits: Outbox.Limits(maxEntries: 100_000),
            backoff: Outbox.Backoff(jitter: { 1 }))
        let store = try CloudStore(providers: providers, options: options)
        var model: [[UInt8]: String] = [:]
        var problems: [String] = []
        func key() -> String {
            "k"
                + (0..<Int.random(in: 1...3, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
        }
        func describe(_ key: String) -> String {
            key.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " ")
        }

        for step in 0..<steps {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let items = (0..<Int.random(in: 1...6, using: &random)).map { _ in
                    let key = key()
                    return KeyValue(key, "s\(step)-\(describe(key))")
                }
                // The last write of a key in a batch is the one that counts, as in the model.
                for (item, result) in zip(items, try await store.multiSet(items)) where (try? result.get()) != nil {
                    model[Array(item.key.utf8)] = item.value
                }
            case 4..<6:
                let known = Array(model.keys)
                guard !known.isEmpty else { continue }
                let keys = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                    String(decoding: known.randomElement(using: &random)!, as: UTF8.self)
                }
                for (key, result) in zip(keys, try await store.multiRemove(keys)) where (try? result.get()) != nil {
                    model[Array(key.utf8)] = nil
                }
            case 6:
                // One provider goes away or comes back: its writes wait in the outbox meanwhile.
                let provider = providers.randomElement(using: &random)!
                provider.isAvailableNow.toggle()
                if providers.allSatisfy({ !$0.isAvailableNow }) { provider.isAvailableNow = true }
                clock.advance(by: .seconds(3600))
            case 7:
                for provider in providers { provider.isAvailableNow = true }
                clock.advance(by: .seconds(3600))
                _ = try await store.flushOutbox()
            default:
                let listed = try await store.allKeys().keys
                let expected = model.keys.sorted { $0.lexicographicallyPrecedes($1) }
                if listed.map({ Array($0.utf8) }) != expected {
                    let listedSet = Set(listed.map { Array($0.utf8) })
                    let missing = expected.filter { !listedSet.contains($0) }.map {
                        describe(String(decoding: $0, as: UTF8.self))
                    }
                    let extra = listedSet.subtracting(expected).map { describe(String(decoding: $0, as: UTF8.self)) }
                    problems.append(
                        "seed \(seed) step \(step): listing lacks \(missing), has extra \(extra)"
                            + (missing.isEmpty && extra.isEmpty ? ", in another order" : ""))
                }
                let values = try await store.multiGet(listed)
                for (key, value) in zip(listed, values) where value != model[Array(key.utf8)] {
                    problems.append("seed \(seed) step \(step): \(describe(key)) reads \(value ?? "nil")")
                }
            }
            if problems.count > 5 { break }
        }
        // Everything delivered: each provider holds exactly the model, byte for byte.
        for provider in providers { provider.isAvailableNow = true }
        clock.advance(by: .seconds(3600))
        _ = try await store.flushOutbox()
        for provider in providers {
            let keys = try await listEveryKey(of: provider, pageSize: 3)
            var held: [[UInt8]: String] = [:]
            for (key, result) in zip(keys, try await provider.get(keys)) {
                if held.updateValue(try result.get() ?? "<nil>", forKey: Array(key.utf8)) != nil {
                    problems.append("seed \(seed): \(provider.id) listed \(describe(key)) twice")
                }
            }
            if held != model {
                let lost = model.keys.filter { held[$0] == nil }.count
                let extra = held.keys.filter { model[$0] == nil }.count
                let wrong = model.keys.filter { held[$0] != nil && held[$0] != model[$0] }.count
                problems.append(
                    "seed \(seed): \(provider.id) lost \(lost), kept \(extra) removed, \(wrong) wrong values")
            }
        }
        store.close()
        return problems
    }
}

@Suite struct KeyIdentityPropertyTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func noKeyIsLostOrMerged(seed: UInt64) async throws {
        let problems = try await KeyIdentityModel.run(seed: seed, steps: 150)
        #expect(problems.isEmpty, "\(problems)")
    }
}

@Suite(
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct KeyIdentityStressTests {
    /// Seeds 4 to 15, or to 43 under `CLOUDSYNC_STRESS=full`.
    @Test(arguments: Array(4..<UInt64(4 + StressSize.pick(ci: 12, full: 40))))
    func noKeyIsLostOrMergedOverLongRuns(seed: UInt64) async throws {
        let problems = try await KeyIdentityModel.run(seed: seed, steps: 600)
        #expect(problems.isEmpty, "\(problems)")
    }
}
