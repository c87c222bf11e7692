import CloudSync
import CloudSyncCrypto
import CloudSyncPipeline
import Foundation

/// Reads the items of an export file (any version, see ``ExportFile``) one at a time, in the file's order.
///
/// ``check(_:codecs:)`` reads a file to its end first, so an import writes nothing from a file that turns out to be
/// damaged, cut short or holding a key twice.
struct ExportFileReader {
    private let path: String
    private var json: StreamingJSONReader
    private var state = State.items(index: 0, list: true)
    private var version: Int?
    private static let advice = "the file is damaged; make it again with `cloudsync run` (export job)"

    private enum State {
        case items(index: Int, list: Bool)
        case done
    }

    /// Opens `path`, opening an encrypted file with whichever of `codecs` holds its key, and reads up to its items.
    init(_ path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) {
        guard let file = FileByteBlocks(path) else {
            throw CloudSyncError(
                .config,
                "\(path) cannot be read: \(describe(errno: errno, path: path)); give the path of an export file")
        }
        try self.init(file, named: path, codecs: codecs)
    }

    /// Reads the export file `source` gives, named `path` in errors.
    init(_ source: ByteBlockSource, named path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) {
        self.path = path
        json = StreamingJSONReader(source, what: path, advice: Self.advice)
        guard try json.peek() == UInt8(ascii: "{") else {
            throw CloudSyncError(.config, "\(path) is not an export file (a JSON object); give the path of one")
        }
        var outer = try Self.header(&json, path: path)
        if let envelope = outer.encrypted {
            // Version 2, sealed whole: the plain text is one envelope.
            let text = try Self.open(envelope, key: ExportFile.envelopeKey, path: path, codecs: codecs)
            json = StreamingJSONReader(MemoryByteBlocks(Array(text.utf8)), what: path, advice: Self.advice)
            outer = try Self.header(&json, path: path)
        } else if outer.version == ExportFile.piecedVersion, let file = outer.file {
            try json.expect(UInt8(ascii: "}"), "'}' ending the header line")
            let pieces = try SealedPieces(json, file: file, path: path, codecs: codecs)
            json = StreamingJSONReader(pieces, what: path, advice: Self.advice)
            outer = try Self.header(&json, path: path)
        }
        guard let list = outer.itemsAreList else {
            throw CloudSyncError(
                .config,
                "\(path) is not an export file with items; make it with `cloudsync run` (export job)")
        }
        version = outer.version
        state = .items(index: 0, list: list)
    }

    /// The number of items of the file at `path`, after reading the whole file.
    ///
    /// Every item must be well formed, no key may come twice, and the version must be one this build reads.
    static func check(_ path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) -> Int {
        var reader = try ExportFileReader(path, codecs: codecs)
        return try reader.readToEnd()
    }

    /// Reads the remaining items, refusing a key that comes twice; returns how many there were.
    mutating func readToEnd() throws(CloudSyncError) -> Int {
        var seen = Set<StoreKey>()
        var count = 0
        while let item = try next() {
            guard seen.insert(StoreKey(item.key)).inserted else {
                throw CloudSyncError(
                    .config,
                    "\(path) holds the key \(item.key) twice (item \(count) and an earlier one); the file is "
                        + "damaged", key: item.key)
            }
            count += 1
        }
        return count
    }

    /// The next item; nil after the last, once the rest of the file has been read and found sound.
    mutating func next() throws(CloudSyncError) -> KeyValue? {
        guard case .items(let index, let list) = state else { return nil }
        let close = list ? UInt8(ascii: "]") : UInt8(ascii: "}")
        if index == 0 ? try json.take(close) : !(try json.take(UInt8(ascii: ","))) {
            if index > 0 { try json.expect(close, list ? "',' or ']' after an item" : "',' or '}' after an item") }
            try finish()
            return nil
        }
        state = .items(index: index + 1, list: list)
        guard list else {
            // Version 1: "key": "value".
            let key = try json.string()
            try json.expect(UInt8(ascii: ":"), "':'")
            guard try json.peek() == UInt8(ascii: "\"") else { throw notAnItem(index) }
            return KeyValue(key, try json.string())
        }
        guard try json.take(UInt8(ascii: "{")) else { throw notAnItem(index) }
        var key: String?
        var value: String?
        if !(try json.take(UInt8(ascii: "}"))) {
            repeat {
                let name = try json.string()
                try json.expect(UInt8(ascii: ":"), "':'")
                guard name == "key" || name == "value", try json.peek() == UInt8(ascii: "\"") else {
                    throw notAnItem(index)
                }
                if name == "key" { key = try json.string() } else { value = try json.string() }
            } while try json.take(UInt8(ascii: ","))
            try json.expect(UInt8(ascii: "}"), "'}' ending item \(index)")
        }
        guard let key, let value else { throw notAnItem(index) }
        return KeyValue(key, value)
    }

    private func notAnItem(_ index: Int) -> CloudSyncError {
        CloudSyncError(
            .config, "\(path): item \(index) is not {\"key\": string, \"value\": string}; the file is damaged")
    }

    /// Reads the members after the items and checks the version.
    private mutating func finish() throws(CloudSyncError) {
        state = .done
        while try json.take(UInt8(ascii: ",")) {
            let name = try json.string()
            try json.expect(UInt8(ascii: ":"), "':'")
            if name == "version" { version = try json.integer() } else { try json.skipValue() }
        }
        try json.expect(UInt8(ascii: "}"), "',' or '}'")
        try json.expectEnd()
        guard version == 1 || version == ExportFile.version else {
            throw CloudSyncError(
                .config,
                "\(path) is not a version 1, \(ExportFile.version) or \(ExportFile.piecedVersion) export file; make "
                    + "it with `cloudsync run` (export job)")
        }
    }

    /// What the members before the items (or of a whole wrapper object) say.
    private struct Header {
        var version: Int?
        var encrypted: String?
        var file: String?
        /// Set when the items were reached: true for a list, false for version 1's object.
        var itemsAreList: Bool?
    }

    /// Reads members of the object at the start of `json` until its items begin (then stops there) or the object
    /// ends in the pieced header (then stops before its `}`).
    private static func header(_ json: inout StreamingJSONReader, path: String) throws(CloudSyncError) -> Header {
        var header = Header()
        try json.expect(UInt8(ascii: "{"), "'{'")
        if try json.peek() == UInt8(ascii: "}") { return header }
        repeat {
            let name = try json.string()
            try json.expect(UInt8(ascii: ":"), "':'")
            switch name {
            case "version": header.version = try json.integer()
            case "encrypted": header.encrypted = try json.string()
            case "file": header.file = try json.string()
            case "items":
                switch try json.peek() {
                case UInt8(ascii: "[")?: header.itemsAreList = true
                case UInt8(ascii: "{")?: header.itemsAreList = false
                default:
                    throw CloudSyncError(
                        .config, "\(path): \"items\" is not a list of {\"key\", \"value\"}; the file is damaged")
                }
                _ = try json.take(UInt8(ascii: header.itemsAreList! ? "[" : "{"))
                return header
            default: try json.skipValue()
            }
        } while try json.take(UInt8(ascii: ","))
        if header.encrypted != nil {
            try json.expect(UInt8(ascii: "}"), "'}'")
            try json.expectEnd()
        } else if try json.peek() != UInt8(ascii: "}") {
            throw json.damaged("expected ',' or '}'")
        }
        return header
    }

    /// The text inside `envelope` under `key`.
    private static func open(_ envelope: String, key: String, path: String, codecs: [EnvelopeCodec])
        throws(CloudSyncError) -> String
    {
        for codec in codecs {
            if let text = try? codec.decode(envelope, key: key) { return text }
        }
        throw CloudSyncError(
            .decode, "\(path) is encrypted and none of the pipeline's codecs opens it; add the key it was made with")
    }
}

/// The plain text of a version 3 file: its envelope lines opened one by one, in order, the last one marked.
private final class SealedPieces: ByteBlockSource {
    private var lines: StreamingJSONReader
    private let file: String
    private let path: String
    private let codecs: [EnvelopeCodec]
    private var codec: EnvelopeCodec?
    private var index = 0
    private var ended = false

    init(_ lines: StreamingJSONReader, file: String, path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) {
        self.lines = lines
        self.file = file
        self.path = path
        self.codecs = codecs
        _ = try self.lines.line()  // the rest of the header line
    }

    func nextBlock() throws(CloudSyncError) -> [UInt8]? {
        // Empty lines after the last piece are allowed (and skipped in a loop: there may be millions).
        var next = try lines.line()
        while ended, let line = next, line.isEmpty { next = try lines.line() }
        guard let line = next else {
            guard ended else {
                throw CloudSyncError(
                    .config,
                    "\(path) ends after piece \(index) without its last piece: the file was cut short; make it again")
            }
            return nil
        }
        guard !ended else {
            throw CloudSyncError(.config, "\(path) goes on after its last piece; the file is damaged")
        }
        let envelope = String(decoding: line, as: UTF8.self)
        let candidates = codec.map { [$0] } ?? codecs
        for last in [false, true] {
            let key = ExportFile.pieceKey(file: file, index: index, last: last)
            for candidate in candidates {
                guard let text = try? candidate.decode(envelope, key: key) else { continue }
                codec = candidate
                ended = last
                index += 1
                return Array(text.utf8)
            }
        }
        if codec == nil {
            throw CloudSyncError(
                .decode,
                "\(path) is encrypted and none of the pipeline's codecs opens it; add the key it was made with")
        }
        throw CloudSyncError(
            .decode,
            "\(path): piece \(index) does not open as piece \(index) of this export (edited, moved or from another "
                + "export); the file is damaged")
    }
}
