import CloudSync
import CloudSyncCrypto
import CloudSyncLocal
import CloudSyncPipeline
import Foundation

/// The export file, written and read as a stream: neither side holds more than a page of items and one piece of
/// text, whatever the number of keys.
///
/// - Plain (version 2): `{"version": 2, "pipeline", "source", "exportedAt", "items": [{"key", "value"}, …],
///   "count"}` — one JSON object, the items in bytewise key order, one per line. Items are a list, not a JSON object:
///   a JSON reader keyed by `String` (Foundation's among them) merges keys that are canonically equivalent, which are
///   different keys to every provider.
/// - Encrypted (version 3): a first line `{"version": 3, "codec", "keyId", "file"}`, then lines each holding one
///   envelope (docs/encryption.md's envelope format) of the next piece of the plain form's text, about 1 MB each. Piece `i` is
///   sealed under the store key `cloudsync.export/<file>/<i>`, the last one under `cloudsync.export/<file>/<i>/last`
///   (`file` is random per export), so a piece moved, dropped, repeated, taken from another export, or a file cut
///   after any piece fails to open.
///
/// Still read: version 1 (`"items": {key: value}`) and version 2 encrypted whole (`{"version": 2, "codec", "keyId",
/// "encrypted": <one envelope of the plain text under the store key cloudsync.export>}`), those in memory.
package enum ExportFile {
    static let envelopeKey = "cloudsync.export"
    static let version = 2
    static let piecedVersion = 3
    /// The plain text sealed in one envelope of a version 3 file (at least; a piece ends after the item that reaches
    /// it).
    static let pieceBytes = 1 << 20

    static func pieceKey(file: String, index: Int, last: Bool) -> String {
        "\(envelopeKey)/\(file)/\(index)" + (last ? "/last" : "")
    }

    /// Every item of the export file `bytes` (any version), in order, after checking the whole of it as an import
    /// does: for the fuzzer, which hands it arbitrary bytes.
    package static func items(of bytes: [UInt8], codecs: [EnvelopeCodec]) throws(CloudSyncError) -> [KeyValue] {
        var checking = try ExportFileReader(MemoryByteBlocks(bytes), named: "fuzz.json", codecs: codecs)
        _ = try checking.readToEnd()
        var reader = try ExportFileReader(MemoryByteBlocks(bytes), named: "fuzz.json", codecs: codecs)
        var items: [KeyValue] = []
        while let item = try reader.next() { items.append(item) }
        return items
    }

    /// `items` (in bytewise key order) written as an export file at `path`, sealed with `codec` when given: for the
    /// fuzzer, which writes what it read and reads it back.
    package static func write(_ items: [KeyValue], to path: String, codec: EnvelopeCodec?) throws(CloudSyncError) {
        let writer = try ExportFileWriter(
            path: path, pipeline: "fuzz", source: "store", codec: codec.map { ("fuzz", $0) })
        try writer.add(items)
        try writer.finish()
    }
}

/// Writes an export file item by item (see ``ExportFile``); nothing appears at the path before ``finish()``.
final class ExportFileWriter {
    private let output: OutputFileStream
    private let sealing: (codec: EnvelopeCodec, file: String)?
    private var text: [UInt8] = []
    private var pieces = 0
    private var count = 0
    private var lastKey: String?
    private let pieceBytes: Int

    /// Starts the file at `path` (owner-only: the items are plaintext unless a codec seals them); `pieceBytes` is for
    /// tests, which seal many pieces without megabytes of items.
    init(
        path: String, pipeline: String, source: String, codec: (id: String, codec: EnvelopeCodec)?,
        pieceBytes: Int = ExportFile.pieceBytes
    ) throws(CloudSyncError) {
        self.pieceBytes = pieceBytes
        output = try OutputFileStream(path, mode: 0o600, what: "the export file")
        if let (id, codec) = codec {
            let file = UUID().uuidString.lowercased()
            sealing = (codec, file)
            // Both names a restore needs: the pipeline's codec, and the key of its ring that encrypted the file.
            var header = Array("{\"version\":\(ExportFile.piecedVersion),\"codec\":".utf8)
            JSONText.appendString(id, to: &header)
            header += ",\"keyId\":".utf8
            JSONText.appendString(codec.keys[0].id, to: &header)
            header += ",\"file\":\"\(file)\"}\n".utf8
            try output.write(header)
        } else {
            sealing = nil
        }
        text.reserveCapacity(pieceBytes + 64 * 1024)
        text += "{\"version\":\(ExportFile.version),\"pipeline\":".utf8
        JSONText.appendString(pipeline, to: &text)
        text += ",\"source\":".utf8
        JSONText.appendString(source, to: &text)
        text += ",\"exportedAt\":\"\(ReportTime.string(Date()))\",\"items\":[".utf8
    }

    /// Appends `items`, which must come after every key written so far in bytewise order.
    func add(_ items: [KeyValue]) throws(CloudSyncError) {
        for item in items {
            if let lastKey, !StoreKey.bytesPrecede(lastKey, item.key) {
                throw CloudSyncError(
                    .config, "export: \(item.key) comes after \(lastKey); the keys must be in bytewise order",
                    key: item.key)
            }
            lastKey = item.key
            text.append(contentsOf: count == 0 ? "\n{\"key\":".utf8 : ",\n{\"key\":".utf8)
            JSONText.appendString(item.key, to: &text)
            text.append(contentsOf: ",\"value\":".utf8)
            JSONText.appendString(item.value, to: &text)
            text.append(UInt8(ascii: "}"))
            count += 1
            if text.count >= pieceBytes { try emit(last: false) }
        }
    }

    /// Ends the items, writes the count and puts the file at its path; returns how many items it holds.
    @discardableResult
    func finish() throws(CloudSyncError) -> Int {
        text.append(contentsOf: "\n],\"count\":\(count)}\n".utf8)
        try emit(last: true)
        try output.commit()
        return count
    }

    /// Writes the text gathered so far: as it is, or sealed as the next piece.
    private func emit(last: Bool) throws(CloudSyncError) {
        guard let (codec, file) = sealing else {
            try output.write(text)
            text.removeAll(keepingCapacity: true)
            return
        }
        let piece = String(decoding: text, as: UTF8.self)
        let key = ExportFile.pieceKey(file: file, index: pieces, last: last)
        let envelope: String
        do {
            envelope = try codec.encode(piece, key: key)
        } catch {
            throw CloudSyncError(.config, "cannot encrypt the export file: \(error)")
        }
        try output.write(envelope)
        try output.write("\n")
        pieces += 1
        text.removeAll(keepingCapacity: true)
    }
}
