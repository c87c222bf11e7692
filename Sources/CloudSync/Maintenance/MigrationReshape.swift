/// How a migration reshapes what it copies.
///
/// Keys are renamed by a ``KeyRename``, values rewritten or left out by a ``ValueReshaping``. Without either it copies keys and values as they are.
public struct MigrationReshape: Sendable {
    /// The names keys take at the destination; nil keeps every key's name.
    public var rename: KeyRename?
    /// What becomes of each value between the source's codec and the destination's; nil copies values as they are.
    public var values: (any ValueReshaping)?

    /// A reshape renaming with `rename` and rewriting values with `values`.
    public init(rename: KeyRename? = nil, values: (any ValueReshaping)? = nil) {
        self.rename = rename
        self.values = values
    }

    /// Keys and values copied as they are.
    public static let none = MigrationReshape()

    /// What becomes of each of `values` (each key beside its plaintext), in order: its ``ValueReshaping``'s outcome,
    /// or the plaintext itself when there is none.
    func reshaped(_ values: [(key: String, value: String)]) async -> [Result<String?, CloudSyncError>] {
        guard let reshaping = self.values else { return values.map { .success($0.value) } }
        return await reshaping.reshape(values)
    }

    /// The destination's name for `key`, or the error failing it when the rename gives it none (another key could
    /// take the same name).
    func target(of key: String) -> Result<String, CloudSyncError> {
        guard let rename else { return .success(key) }
        guard let target = rename.target(of: key) else {
            return .failure(
                CloudSyncError(
                    .config,
                    "the rename \(rename) gives no name of its own to \(key): \(rename.source(of: key)) becomes "
                        + "\(key) too, so copying both would write one over the other; narrow the job's `keys` or "
                        + "change the rename",
                    key: key))
        }
        return .success(target)
    }
}

/// What a migration makes of each value it copies, between decoding with the source's codec and encoding with the
/// destination's: a new plaintext, nothing (the key is left out, as a filter leaves it), or an error failing that key
/// alone.
public protocol ValueReshaping: Sendable {
    /// The outcome for each of `values` (each key beside its plaintext), in the same order.
    func reshape(_ values: [(key: String, value: String)]) async -> [Result<String?, CloudSyncError>]
}
