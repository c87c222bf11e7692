import CloudSync
import CloudSyncCloudKit
import CloudSyncEmulator
import CloudSyncTesting
import Foundation
import Testing

/// A listing, a change-feed read and a write ask CloudKit for no value.
///
/// The answers carry names and change tags, not the records' values. The emulator serves both readings of an empty
/// `desiredKeys` (none, as documented, or every field), and the provider's results are the same under either.
@Suite struct CloudKitDesiredKeysTests {
    /// Bytes of answer bodies the emulator sent for `operation` (`changes/zone`) since its log was cleared.
    static func answered(_ fixture: CloudKitFixture, _ operation: String) -> Int {
        fixture.host.server.requestLog.filter { $0.path.hasSuffix("/" + operation) }.reduce(0) {
            $0 + ($1.responseBodySize ?? 0)
        }
    }

    @Test(arguments: CloudKitDatabaseEmulator.EmptyDesiredKeysAnswer.allCases)
    func listingsFeedsAndWritesBringNoValuesBack(_ reading: CloudKitDatabaseEmulator.EmptyDesiredKeysAnswer)
        async throws
    {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure { $0.emptyDesiredKeys = reading }
        let provider = try fixture.provider()
        let large = String(repeating: "x", count: 150_000)
        let names = (0..<20).map { String(format: "key%02d", $0) }
        // The zone is made by the first write.
        _ = try await provider.set([KeyValue("zone", "made")])
        let cursor = try #require(try await provider.changeFeedCursor())
        fixture.host.server.clearLog()
        let tags = try await provider.set(
            names.map { KeyValue($0, large) }, conditions: Array(repeating: nil, count: names.count)
        ).map { try $0.get() }
        let written = Self.answered(fixture, "records/modify")

        fixture.host.server.clearLog()
        let page = try await provider.listKeys(after: nil, limit: 200)
        let listed = Self.answered(fixture, "changes/zone")
        #expect(page.keys.sorted() == names + ["zone"])
        // The tags a write answered are those the listing gives, whichever way the empty list was read.
        let listedTags = Dictionary(uniqueKeysWithValues: zip(page.keys, page.versions ?? []))
        #expect(names.map { listedTags[$0] ?? nil } == tags)
        guard case .changes(let changes) = try await provider.changes(since: cursor, limit: 200) else {
            Issue.record("the feed refused its own cursor")
            return
        }
        #expect(changes.changes.map(\.key).sorted() == names)
        #expect(try await provider.get(["key07"]).first?.get() == large, "a read still brings the value")

        switch reading {
        case .noFields:
            // 20 values of 150 KB are 3 MB; names, tags and times are a few hundred bytes a record.
            #expect(listed < 20 * 1_000, "a listing of 20 names answered \(listed) bytes")
            #expect(written < 20 * 1_000, "20 writes were answered with \(written) bytes")
        case .allFields:
            #expect(listed > 20 * 150_000, "this reading answers every field: \(listed) bytes")
        }
    }
}
