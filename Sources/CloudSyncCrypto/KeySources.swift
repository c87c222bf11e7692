import CloudSync
import CloudSyncSodium

/// Where the keys of an ``EnvelopeCodec`` come from. Errors name the key id and the source, never key bytes.
extension EnvelopeCodec.Key {
    /// A key file: one line of base64 holding 32 bytes (see ``generateKeyFile(at:)``).
    public static func keyFile(id: String, path: String) throws(CloudSyncError) -> Self {
        try .raw(id: id, loading { () throws(SodiumError) in try SecretBytes.load(keyFile: path) })
    }

    /// A key given as base64 in an environment variable.
    public static func environment(id: String, variable: String) throws(CloudSyncError) -> Self {
        try .raw(id: id, loading { () throws(SodiumError) in try SecretBytes.load(environmentVariable: variable) })
    }

    /// A passphrase read from an environment variable, stretched with Argon2id.
    public static func passphrase(
        id: String, environmentVariable variable: String, limits: Argon2id.Limits = .interactive
    )
        throws(CloudSyncError) -> Self
    {
        try .passphrase(
            id: id, loading { () throws(SodiumError) in try SecretBytes.passphrase(environmentVariable: variable) },
            limits: limits)
    }

    /// A passphrase read from a file (without its trailing newline), stretched with Argon2id.
    public static func passphrase(id: String, file path: String, limits: Argon2id.Limits = .interactive)
        throws(CloudSyncError) -> Self
    {
        try .passphrase(
            id: id, loading { () throws(SodiumError) in try SecretBytes.passphrase(file: path) }, limits: limits)
    }

    private static func loading(_ load: () throws(SodiumError) -> SecretBytes) throws(CloudSyncError) -> SecretBytes {
        do {
            return try load()
        } catch {
            throw CloudSyncError(.config, error.message)
        }
    }
}

/// Writes a new key file: 32 random bytes as one line of base64, mode 0600.
///
/// Refuses to replace an existing file, since losing a key loses everything encrypted with it.
public func generateKeyFile(at path: String) throws(CloudSyncError) {
    do {
        try SecretBytes.random(count: XChaCha20Poly1305.keyByteCount).save(keyFile: path)
    } catch {
        throw CloudSyncError(.config, error.message)
    }
}
