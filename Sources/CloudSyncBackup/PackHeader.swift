import Foundation

/// What a pack says of itself, after its blobs: which blob ids it holds, where, so a lost index can be rebuilt from
/// the packs alone (restic's `repair index`).
///
/// A pack's plaintext is its blobs, then the header (UTF-8 JSON, `[["<blob id>", offset, length], ...]`), then
/// 8 bytes: `CSPH` and the header's length as a little-endian 32-bit number. Packs written before format 3 have
/// none; readers that go through the index never look at it.
enum PackHeader {
    static let magic = Array("CSPH".utf8)

    /// The header and trailer to append to a pack holding `blobs`.
    static func encoded(_ blobs: [(id: String, offset: Int, length: Int)]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(blobs.count * PackWriter.headerBytesPerBlob + PackWriter.trailerBytes)
        BlobRowsJSON.append(blobs.sorted { $0.offset < $1.offset }, to: &bytes)
        let length = UInt32(bytes.count)
        bytes += magic
        bytes += (0..<4).map { UInt8(truncatingIfNeeded: length >> (8 * $0)) }
        return bytes
    }

    /// The blobs a pack's plaintext says it holds; nil when it has no header, or one that does not parse or names
    /// bytes past the blobs.
    static func blobs(of pack: [UInt8]) -> [(id: String, offset: Int, length: Int)]? {
        guard pack.count >= 8, Array(pack[(pack.count - 8)..<(pack.count - 4)]) == magic else { return nil }
        let length = pack[(pack.count - 4)...].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
        guard length <= pack.count - 8 else { return nil }
        let blobsEnd = pack.count - 8 - length
        guard let rows = try? JSONSerialization.jsonObject(with: Data(pack[blobsEnd..<(pack.count - 8)])) as? [[Any]]
        else { return nil }
        var blobs: [(id: String, offset: Int, length: Int)] = []
        for row in rows {
            guard row.count == 3, let id = row[0] as? String, let offset = row[1] as? Int, let size = row[2] as? Int,
                offset >= 0, size >= 0, offset + size <= blobsEnd
            else { return nil }
            blobs.append((id, offset, size))
        }
        return blobs
    }
}
