import CloudSync

/// JSON for lists of blob locations, `[["<id>",<offset>,<length>],...]`, written byte by byte: a pack's header
/// and each pack's member of an index object.
///
/// `JSONSerialization` bridged every row to an `NSArray` and back, and took 37% of a first backup's CPU with small
/// values (about four rows a KB); nothing reads these bytes as anything but JSON, so they need not be Foundation's.
enum BlobRowsJSON {
    /// Appends `blobs` as a JSON array of `[id, offset, length]` rows.
    static func append(_ blobs: some Collection<(id: String, offset: Int, length: Int)>, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "["))
        for (index, blob) in blobs.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "["))
            JSONText.appendString(blob.id, to: &bytes)
            bytes.append(UInt8(ascii: ","))
            appendNumber(blob.offset, to: &bytes)
            bytes.append(UInt8(ascii: ","))
            appendNumber(blob.length, to: &bytes)
            bytes.append(UInt8(ascii: "]"))
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Appends `value` in decimal.
    static func appendNumber(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
    }
}
