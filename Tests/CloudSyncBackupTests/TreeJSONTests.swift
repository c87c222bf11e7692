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

    /// Blob rows (pack headers, index objects) are written directly too; they need only parse to what was meant.
    @Test(arguments: [5, 6]) func blobRowsParseToTheRowsWritten(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        // Not a leading U+FEFF: Foundation's parser drops it from the start of a string (the bytes hold it).
        let alphabet = Self.awkward.filter { !$0.hasPrefix("\u{FEFF}") } + ["0123456789abcdef"]
        let rows = (0..<300).map { _ in
            (
                id: (0..<Int.random(in: 0...4, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
                    .joined(),
                offset: [0, 9, 10, 99, 1 << 22, Int.max].randomElement(using: &random)!,
                length: Int.random(in: 0...(1 << 24), using: &random)
            )
        }
        var bytes: [UInt8] = []
        BlobRowsJSON.append(rows, to: &bytes)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [[Any]])
        #expect(parsed.count == rows.count)
        for (row, expected) in zip(parsed, rows) {
            #expect(row[0] as? String == expected.id)
            #expect((row[1] as? NSNumber)?.int64Value == Int64(expected.offset))
            #expect((row[2] as? NSNumber)?.intValue == expected.length)
        }
        var empty: [UInt8] = []
        BlobRowsJSON.append([(id: String, offset: Int, length: Int)](), to: &empty)
        #expect(empty == Array("[]".utf8))
    }

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
