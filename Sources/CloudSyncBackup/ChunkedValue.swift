/// How a tree names a value stored in chunks: `chunks:<size>:<list id>`.
///
/// The list is a blob holding the JSON array of the chunks' blob ids in order, and `size` is the value's bytes (so a
/// snapshot's size is known without reading the list). A blob id is hexadecimal, so an entry's id with this prefix is
/// never a plain blob's.
enum ChunkedValue {
    static let prefix = "chunks:"

    /// The entry id of a value of `size` bytes whose chunk list is the blob `list`.
    static func entryID(size: Int, list: String) -> String { prefix + String(size) + ":" + list }

    /// The size and list id an entry id names, or nil when it names a plain blob.
    static func parse(_ entryID: String) -> (size: Int, list: String)? {
        guard entryID.hasPrefix(prefix) else { return nil }
        let parts = entryID.dropFirst(prefix.count).split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let size = Int(parts[0]) else { return nil }
        return (size, String(parts[1]))
    }
}
