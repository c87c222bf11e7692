import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Reads of the SQLite provider against a dictionary of what it holds.
///
/// A batch of keys in bytewise order is read in one walk over the rows (a sync's and an export's pages); any other
/// batch key by key. Both must answer what a dictionary of the stored values answers, whatever the batch: dense or
/// scattered over the table (where the walk gives up at its row limit), with absent keys, repeats, keys that are
/// prefixes of others, non-ASCII and control characters, or out of order.
@Suite struct SQLiteRangeReadTests {
    /// Keys whose bytewise order differs from `String`'s and from any locale's: prefixes, upper before lower case,
    /// bytes above 127, a control character.
    static func randomKey(_ random: inout SeededRandom) -> String {
        let pieces = ["a", "b", "B", "é", "e\u{301}", "z", "\u{1}", "日", "/", "-", "0", "9"]
        return (0..<Int.random(in: 1...5, using: &random)).map { _ in pieces.randomElement(using: &random)! }
            .joined()
    }

    @Test(arguments: [1, 2, 3, 4])
    func everyBatchReadsWhatTheModelHolds(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        let directory = try TemporaryDirectory()
        let provider = try SQLiteProvider(id: "p", path: directory.file("kv.db"))
        var model: [StoreKey: String] = [:]
        while model.count < 1_500 { model[StoreKey(Self.randomKey(&random))] = "v\(model.count)" }
        let items = model.map { KeyValue($0.key.string, $0.value) }
        for result in try await provider.set(items) { try result.get() }
        let stored = model.keys.map(\.string).sorted(by: StoreKey.bytesPrecede)
        for _ in 0..<200 {
            var batch: [String]
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                // A run of the listing, as a page of it.
                let start = Int.random(in: 0..<stored.count, using: &random)
                batch = Array(stored[start..<min(stored.count, start + Int.random(in: 1...300, using: &random))])
            case 1:
                // Scattered over the whole table: the walk meets far more rows than keys.
                batch = (0..<Int.random(in: 16...60, using: &random)).map { _ in stored.randomElement(using: &random)! }
            default:
                // Stored and absent keys mixed.
                batch = (0..<Int.random(in: 1...200, using: &random)).map { _ in
                    Bool.random(using: &random) ? stored.randomElement(using: &random)! : Self.randomKey(&random)
                }
            }
            // Mostly in bytewise order (repeats kept), as the store's pages are; sometimes not.
            if Int.random(in: 0..<5, using: &random) > 0 { batch.sort(by: StoreKey.bytesPrecede) }
            let read = try await provider.get(batch).map { try $0.get() }
            #expect(read == batch.map { model[StoreKey($0)] }, "batch of \(batch.count)")
        }
        await provider.close()
    }
}
