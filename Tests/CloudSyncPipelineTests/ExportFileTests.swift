import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncJobs
@testable import CloudSyncPipeline

/// The export file as a stream: what is written reads back item for item, plain files read the same through
/// Foundation's JSON reader, a sealed file's pieces cannot be moved, dropped, cut or mixed, and a damaged file is
/// refused before an import writes anything.
struct ExportFileTests {
    static let codec = try! EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: [UInt8](repeating: 7, count: 32)))]
    )
    static let otherCodec = try! EnvelopeCodec(
        keys: [.raw(id: "k2", SecretBytes(copying: [UInt8](repeating: 9, count: 32)))])

    /// Keys and values that exercise the escapes: quotes, backslashes, control characters, slashes, non-ASCII,
    /// characters beyond the BMP, and a pair of canonically equivalent keys (two keys to every provider).
    static func items(seed: UInt64, count: Int, valueBytes: Int = 40) -> [KeyValue] {
        var random = SeededRandom(seed: seed)
        let pieces = ["a", "/", "\"", "\\", "\n", "\t", "\u{01}", "\u{1F}", "é", "e\u{301}", "😀", "\u{2028}", " ", "{"]
        var seen = Set<StoreKey>()
        var items: [KeyValue] = []
        while items.count < count {
            let key =
                "k\(items.count)-"
                + (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            guard seen.insert(StoreKey(key)).inserted else { continue }
            var value = (0..<Int.random(in: 0...8, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            value += String(repeating: "v", count: Int.random(in: 0...valueBytes, using: &random))
            items.append(KeyValue(key, value))
        }
        items += [KeyValue("café", "composed"), KeyValue("cafe\u{301}", "decomposed")]
        return items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
    }

    static func write(
        _ items: [KeyValue], to path: String, codec: EnvelopeCodec?, pageSize: Int = 7,
        pieceBytes: Int = ExportFile.pieceBytes
    ) throws {
        let writer = try ExportFileWriter(
            path: path, pipeline: "p\"q", source: "store", codec: codec.map { ("vault", $0) }, pieceBytes: pieceBytes)
        for start in stride(from: 0, to: items.count, by: pageSize) {
            try writer.add(Array(items[start..<min(start + pageSize, items.count)]))
        }
        #expect(try writer.finish() == items.count)
    }

    static func read(_ path: String, codecs: [EnvelopeCodec] = [codec]) throws -> [KeyValue] {
        var reader = try ExportFileReader(path, codecs: codecs)
        var items: [KeyValue] = []
        while let item = try reader.next() { items.append(item) }
        return items
    }

    @Test(arguments: [1, 2, 3])
    func whatIsWrittenReadsBackItemForItem(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let items = Self.items(seed: seed, count: 300)
        for codec in [nil, Self.codec] {
            let path = directory.file(codec == nil ? "plain.json" : "sealed.json")
            try Self.write(items, to: path, codec: codec)
            #expect(try Self.read(path) == items)
            #expect(try ExportFileReader.check(path, codecs: [Self.codec]) == items.count)
        }
        // The plain file is one JSON document any reader takes, with the same items in the same order.
        let data = try Data(contentsOf: URL(fileURLWithPath: directory.file("plain.json")))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == 2)
        #expect(object["count"] as? Int == items.count)
        #expect(object["pipeline"] as? String == "p\"q")
        let list = try #require(object["items"] as? [[String: String]])
        #expect(list.map { KeyValue($0["key"]!, $0["value"]!) } == items)
        // Owner-only, whatever the umask.
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.file("sealed.json"))
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func anEmptyExportIsAValidFile() throws {
        let directory = try TemporaryDirectory()
        for codec in [nil, Self.codec] {
            let path = directory.file("empty.json")
            try Self.write([], to: path, codec: codec)
            #expect(try Self.read(path).isEmpty)
        }
    }

    /// A file Foundation's JSON writer made (as version 2 exports were written before they were streamed, keys
    /// sorted, so `version` comes after the items) and version 1's object of items.
    @Test func filesOfEarlierWritersStillRead() throws {
        let directory = try TemporaryDirectory()
        let items = Self.items(seed: 9, count: 50)
        let plain: [String: Any] = [
            "version": 2, "pipeline": "p", "source": "store", "count": items.count,
            "exportedAt": "2026-01-01T00:00:00Z",
            "items": items.map { ["key": $0.key, "value": $0.value] },
        ]
        let text = String(
            decoding: try JSONSerialization.data(withJSONObject: plain, options: [.sortedKeys]), as: UTF8.self)
        try text.write(toFile: directory.file("v2.json"), atomically: true, encoding: .utf8)
        #expect(try Self.read(directory.file("v2.json")) == items)

        let wrapped: [String: Any] = [
            "version": 2, "codec": "vault", "keyId": "k1",
            "encrypted": try Self.codec.encode(text, key: ExportFile.envelopeKey),
        ]
        try JSONSerialization.data(withJSONObject: wrapped, options: [.sortedKeys]).write(
            to: URL(fileURLWithPath: directory.file("v2-sealed.json")))
        #expect(try Self.read(directory.file("v2-sealed.json")) == items)

        try #"{"version": 1, "count": 2, "items": {"b": "2", "a\"": "1"}}"#.write(
            toFile: directory.file("v1.json"), atomically: true, encoding: .utf8)
        #expect(try Self.read(directory.file("v1.json")) == [KeyValue("b", "2"), KeyValue("a\"", "1")])
    }

    /// Every way a sealed file's lines can be moved, dropped, repeated, cut or mixed with another export's.
    @Test func aSealedFileOpensOnlyWhole() throws {
        let directory = try TemporaryDirectory()
        // About 3.5 pieces of text, in pieces of 4 KB rather than 1 MB: the same file, a thousandth of the work.
        let items = (0..<35).map { KeyValue(String(format: "key-%05d", $0), String(repeating: "x", count: 380)) }
        try Self.write(items, to: directory.file("a.json"), codec: Self.codec, pageSize: 5, pieceBytes: 4096)
        try Self.write(items, to: directory.file("b.json"), codec: Self.codec, pageSize: 5, pieceBytes: 4096)
        let lines = try String(contentsOfFile: directory.file("a.json"), encoding: .utf8).split(separator: "\n")
            .map(String.init)
        let other = try String(contentsOfFile: directory.file("b.json"), encoding: .utf8).split(separator: "\n")
            .map(String.init)
        #expect(lines.count == 5, "a header and four pieces")
        #expect(try Self.read(directory.file("a.json")) == items)
        #expect(!lines.joined().contains("key-00001"), "the keys are sealed too")

        let damaged: [(String, [String])] = [
            ("two pieces swapped", [lines[0], lines[2], lines[1], lines[3], lines[4]]),
            ("a middle piece dropped", [lines[0], lines[1], lines[3], lines[4]]),
            ("the last piece dropped", Array(lines[0...3])),
            ("a piece repeated", [lines[0], lines[1], lines[1], lines[2], lines[3], lines[4]]),
            ("a piece of another export", [lines[0], lines[1], other[2], lines[3], lines[4]]),
            ("another export's header", [other[0]] + lines[1...]),
            ("a line after the last piece", lines + [lines[4]]),
            ("the last piece cut", Array(lines[0...3]) + [String(lines[4].dropLast(10))]),
        ]
        for (what, text) in damaged {
            let path = directory.file("damaged.json")
            try (text.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            #expect(throws: CloudSyncError.self, "\(what)") { try ExportFileReader.check(path, codecs: [Self.codec]) }
        }
        let wrongKey = #expect(throws: CloudSyncError.self) {
            try ExportFileReader.check(directory.file("a.json"), codecs: [Self.otherCodec])
        }
        #expect(wrongKey?.code == .decode)
        #expect(wrongKey?.message.contains("add the key it was made with") == true)
    }

    @Test func aDamagedPlainFileIsRefusedWithWhereAndWhy() throws {
        let directory = try TemporaryDirectory()
        let items = Self.items(seed: 4, count: 40)
        try Self.write(items, to: directory.file("good.json"), codec: nil)
        let good = try String(contentsOfFile: directory.file("good.json"), encoding: .utf8)
        let cases: [(String, String, String)] = [
            ("cut short", String(good.prefix(good.utf8.count / 2)), "at byte"),
            ("a key twice", good.replacingOccurrences(of: "\n],", with: ",\n" + firstItem(good) + "\n],"), "twice"),
            (
                "an item that is not a pair", good.replacingOccurrences(of: "\"items\":[", with: "\"items\":[7,"),
                "item 0"
            ),
            (
                "a number for a value",
                good.replacingOccurrences(of: "\"items\":[", with: #""items":[{"key":"z","value":1},"#), "item 0"
            ),
            ("an unknown version", good.replacingOccurrences(of: "\"version\":2", with: "\"version\":9"), "version"),
            ("text after the end", good + "{}", "after the end"),
            ("not JSON", "key=value\n", "not an export file"),
        ]
        for (what, text, says) in cases {
            let path = directory.file("bad.json")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let error = #expect(throws: CloudSyncError.self, "\(what)") { try ExportFileReader.check(path, codecs: []) }
            #expect(error?.code == .config, "\(what)")
            #expect(error?.message.contains(says) == true, "\(what): \(error?.message ?? "")")
            #expect(error?.message.contains(path) == true, "\(what) names the file")
        }
        #expect(throws: CloudSyncError.self) { try ExportFileReader.check(directory.file("missing.json"), codecs: []) }
        // A byte that is not UTF-8 inside a key.
        var bytes = Array(good.utf8)
        let quote = bytes.firstIndex(of: UInt8(ascii: "k"))!
        bytes[quote] = 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: directory.file("latin1.json")))
        let notUTF8 = #expect(throws: CloudSyncError.self) {
            try ExportFileReader.check(directory.file("latin1.json"), codecs: [])
        }
        #expect(notUTF8?.message.contains("not UTF-8") == true, "\(notUTF8?.message ?? "")")
    }

    private func firstItem(_ text: String) -> String {
        let start = text.range(of: "\n{\"key\"")!.lowerBound
        let end = text[start...].range(of: "}")!.upperBound
        return String(text[text.index(after: start)..<end])
    }

    /// The tokenizer against Foundation's reader on strings with every escape: both read the same text.
    @Test(arguments: [11, 12])
    func escapesReadAsFoundationReadsThem(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        for _ in 0..<200 {
            let scalars = (0..<Int.random(in: 0...20, using: &random)).map { _ -> Character in
                switch Int.random(in: 0..<4, using: &random) {
                case 0: Character(Unicode.Scalar(UInt8.random(in: 0...0x7F, using: &random)))
                case 1: Character(Unicode.Scalar(UInt32.random(in: 0x80...0xD7FF, using: &random))!)
                case 2: Character(Unicode.Scalar(UInt32.random(in: 0x1_0000...0x10_FFFF, using: &random))!)
                default: Character(Unicode.Scalar(UInt32.random(in: 0xE000...0xFFFD, using: &random))!)
                }
            }
            let value = String(scalars)
            // Foundation writes escapes its own way (\/ and \uXXXX among them); both readers agree on its text.
            let data = try JSONSerialization.data(withJSONObject: [value], options: [.fragmentsAllowed])
            var json = StreamingJSONReader(MemoryByteBlocks(Array(data)), what: "test", advice: "")
            try json.expect(UInt8(ascii: "["), "[")
            #expect(try json.string() == value)
            var ours: [UInt8] = []
            JSONText.appendString(value, to: &ours)
            let back = try JSONSerialization.jsonObject(with: Data(ours), options: [.fragmentsAllowed]) as? String
            #expect(back == value)
        }
    }

    /// The eight-bytes-at-a-time scan of a string's plain run against the byte-by-byte rule: where it stops, and
    /// whether it saw a byte of 0x80 or more, from every start, over bytes dense in quotes, backslashes, control
    /// characters and high bytes at every position of a word.
    @Test(arguments: [21, 22])
    func theWordScanStopsWhereTheByteScanStops(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let specials: [UInt8] = [0x22, 0x5C, 0x00, 0x1F, 0x0A, 0x80, 0xC3, 0xFF, 0x21, 0x5B, 0x5D, 0x20, 0x7F]
        for _ in 0..<3_000 {
            let block = (0..<Int.random(in: 0...40, using: &random)).map { _ in
                Int.random(in: 0..<6, using: &random) == 0
                    ? specials.randomElement(using: &random)! : UInt8.random(in: 0x23...0x5B, using: &random)
            }
            for start in 0...block.count {
                var expectedEnd = start
                var expectedHigh: UInt8 = 0
                while expectedEnd < block.count, block[expectedEnd] != 0x22, block[expectedEnd] != 0x5C,
                    block[expectedEnd] >= 0x20
                {
                    expectedHigh |= block[expectedEnd]
                    expectedEnd += 1
                }
                var high: UInt8 = 0
                let end = StreamingJSONReader.plainRun(in: block, from: start, highBits: &high)
                #expect(end == expectedEnd, "\(block) from \(start)")
                #expect(high & 0x80 == expectedHigh & 0x80, "\(block) from \(start)")
            }
        }
    }
}
