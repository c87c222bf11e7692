/// Transforms values on their way to and from a provider: encryption, compression, an envelope.
///
/// The store calls `encode` before tiering measures a value, so routing sees the size the value will really
/// occupy, and `decode` before a value is returned or a resolver compares it. Keys are never encoded: listing,
/// tiering and repair need them in the clear. The key is passed so a codec can bind a value to the key it is stored
/// under. Both run synchronously on the calling task; keep them fast.
public protocol ValueCodec: Sendable {
    /// The value as it will be stored under `key`.
    func encode(_ value: String, key: String) throws -> String
    /// The stored value as it was before `encode`; throw when it cannot be (wrong key, tampered, not encoded).
    func decode(_ stored: String, key: String) throws -> String
    /// Whether a stored value is already encoded the way `encode` would encode it now (same key), so re-keying can
    /// skip it.
    func isCurrent(_ stored: String) -> Bool
}

extension ValueCodec {
    /// Nothing counts as current by default, so `rekey` rewrites every value rather than skip one wrongly.
    public func isCurrent(_ stored: String) -> Bool { false }
}
