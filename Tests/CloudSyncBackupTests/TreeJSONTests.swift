import CloudSync
import Foundation
import Testing

@testable import CloudSyncBackup

/// A tree's id is the hash of its bytes, so the direct writer must give `JSONSerialization`'s bytes exactly, or every
/// unchanged tree of the next backup after an upgrade would be stored again under a new id.
@Suite struct TreeJSONTests {
    /// Every character JSON escapes, and the ones around them.
    static let awkward: [String] = {
        var texts = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        texts += ["", "settings/item-000001", "a\"b\\c/d", "é", "日本", "🙂", "\u{2028}\u{2029}", "\u{7F}", "\u{FEFF}x"]
        return texts
    }()

    @Test func rowsOfTextsAreWrittenAsFoundationWritesThem() throws {
        let rows = Self.awkward.map { [$0, "id-" + $0, $0 + $0] }
        #expect(BackupRepository.json(rows: rows) == BackupRepository.json(rows as Any))
    }

    @Test(arguments: [1, 2, 3, 4]) func randomRowsAgreeWithFoundation(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let alphabet = Self.awkward + ["k", "ey", "0123456789abcdef"]
        let rows = (0..<200).map { _ in
            (0..<Int.random(in: 0...4, using: &random)).map { _ in
                (0..<Int.random(in: 0...6, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
                    .joined()
            }
        }
        #expect(BackupRepository.json(rows: rows) == BackupRepository.json(rows as Any))
        #expect(BackupRepository.json(rows: []) == BackupRepository.json([[String]]() as Any))
    }
}
