/// A provider that stores files natively (a directory's files, S3 objects, Drive files, CloudKit assets): it takes a
/// file's bytes under a key from a path and gives them back to a path, streamed, without holding the file in memory.
///
/// Files share the provider's key space with values: a file stored under `photo` is the key `photo` in listings and
/// is removed by `remove`. Its bytes are stored as they are (no codec). Reading it back with `get` answers the bytes
/// as a value at most when they are UTF-8 text, and `ERR_DECODE` otherwise; use ``getFile(_:to:size:)``. The store
/// reaches these through ``CloudStore/putFile(_:from:)`` and ``CloudStore/getFile(_:to:)``.
///
/// Requirements beyond ``Provider``'s:
///
/// - **Streamed both ways**: read the source while sending it, write the destination while receiving it; memory
///   stays bounded by a chunk whatever the file's size.
/// - **Whole or not at all**: a key holds the old bytes or the new ones, never a torn file; a failed `putFile` leaves
///   what the key held.
/// - **Limits before requests**: a file larger than ``maxFileBytes`` is refused with `ERR_PAYLOAD_TOO_LARGE` before a
///   byte is sent (the store checks too).
public protocol FileStoringProvider: Provider {
    /// The largest file one key holds, in bytes; nil when the provider knows no limit.
    var maxFileBytes: Int64? { get }

    /// Stores the bytes of the regular file at `source` (`size` bytes when the store looked) under `key`, replacing
    /// what the key held.
    func putFile(_ key: String, from source: String, size: Int64) async throws

    /// The size in bytes of what `key` holds; nil when it holds nothing.
    func fileSize(_ key: String) async throws -> Int64?

    /// Writes the bytes `key` holds to `destination`, a regular file the store created empty for the purpose (the
    /// provider may write into it or replace it); false, leaving it empty, when the key holds nothing.
    ///
    /// `size` is what ``fileSize(_:)`` answered just before, for sizing deadlines; the bytes written are what the
    /// key holds now.
    func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool
}
