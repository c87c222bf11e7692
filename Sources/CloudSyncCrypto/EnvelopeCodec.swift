import CloudSync
import CloudSyncSodium

/// Encrypts values at rest with XChaCha20-Poly1305 into a text envelope that stays a string (tiering measures the
/// envelope) and binds each ciphertext to the key it is stored under.
///
/// Envelope (UTF-8 text, fields separated by `:`):
///
///     cs1:<key id>:<kdf>:<payload>
///
/// - `cs1` is the format version.
/// - `<key id>` names the key in the ring, `[A-Za-z0-9._-]{1,64}`.
/// - `<kdf>` is `raw` for a 32-byte key, or `argon2id13.<operations>.<memory bytes>.<salt>` for a key derived
///   from a passphrase with libsodium's `crypto_pwhash` (Argon2id v1.3, one lane, 32-byte output), the salt being
///   16 bytes in URL-safe base64 without padding. Every envelope carries the parameters it needs, so a restore
///   needs only the passphrase.
/// - `<payload>` is URL-safe base64 without padding of: a 24-byte random nonce, then the ciphertext with its
///   16-byte Poly1305 tag (`crypto_aead_xchacha20poly1305_ietf_encrypt`).
/// - Associated data: the UTF-8 bytes of everything before the payload — `cs1:<key id>:<kdf>:` — followed by the
///   UTF-8 bytes of the store key. A ciphertext copied under another key, or given other header fields, fails to
///   decrypt.
public final class EnvelopeCodec: ValueCodec {
    static let prefix = "cs1:"

    /// A key of the ring: 32 random bytes, or a passphrase stretched with Argon2id.
    public struct Key: Sendable {
        enum Material: Sendable {
            case raw(SecretBytes)
            case passphrase(SecretBytes, Argon2id.Limits, salt: [UInt8])
        }

        /// The key's id, written into every envelope it encrypts so decoding finds the key again.
        public let id: String
        let material: Material

        /// A 32-byte key (from a key file or an environment variable).
        public static func raw(id: String, _ key: SecretBytes) throws(CloudSyncError) -> Key {
            try checkID(id)
            guard key.count == XChaCha20Poly1305.keyByteCount else {
                throw CloudSyncError(.config, "key \(id) has \(key.count) bytes; a key must be 32 bytes")
            }
            return Key(id: id, material: .raw(key))
        }

        /// A key stretched from `passphrase` with Argon2id under `limits`.
        ///
        /// New envelopes use `salt` (16 random bytes
        /// by default); envelopes made with other salts or limits still open, since each records its own.
        public static func passphrase(
            id: String, _ passphrase: SecretBytes, limits: Argon2id.Limits = .interactive,
            salt: [UInt8] = SecureRandom.bytes(count: Argon2id.saltByteCount)
        ) throws(CloudSyncError) -> Key {
            try checkID(id)
            do {
                try limits.validate()
            } catch {
                throw CloudSyncError(.config, "key \(id): \(error.message)")
            }
            guard salt.count == Argon2id.saltByteCount else {
                throw CloudSyncError(.config, "key \(id): an Argon2id salt must be 16 bytes")
            }
            return Key(id: id, material: .passphrase(passphrase, limits, salt: salt))
        }

        private static func checkID(_ id: String) throws(CloudSyncError) {
            guard KeyRule.nonEmpty.allows(id), id.utf8.count <= 64, KeyRule.recordNameCharacters.allows(id) else {
                throw CloudSyncError(
                    .config,
                    "key id \"\(id)\" must be 1 to 64 ASCII letters, digits, '.', '_' or '-'")
            }
        }
    }

    /// Why a value could not be decoded.
    ///
    /// Never holds key bytes or the value.
    public struct DecodeFailure: Error, Sendable, Equatable, CustomStringConvertible {
        /// What kind of failure it was, for a caller to branch on (the description is for people).
        public enum Reason: String, Sendable {
            /// The value is not an envelope (plaintext, or another tool's data).
            case notAnEnvelope
            /// It looks like an envelope but its fields are broken.
            case malformed
            /// The envelope names a key the ring does not hold.
            case unknownKeyID
            /// The key does not open it: the wrong key or passphrase, or the envelope was modified or moved to
            /// another store key.
            case wrongKeyOrTampered
        }

        /// What kind of failure it was.
        public let reason: Reason
        /// A sentence for people saying what went wrong and, where there is one, what to do; never key bytes or the
        /// value.
        public let description: String
    }

    /// The ring's keys; the first encrypts, any of them decrypts.
    public let keys: [Key]
    /// Whether values that are not envelopes are returned as they are (to encrypt an existing plaintext store by
    /// migrating or re-keying it) rather than refused.
    public let allowPlaintext: Bool
    private let derived = Protected<[String: SecretBytes]>([:])

    /// A codec over the ring `keys`: the first encrypts, any of them decrypts; with `allowPlaintext`, values that are
    /// not envelopes decode as they are.
    ///
    /// Throws `ERR_CONFIG` when `keys` is empty or two keys share an id. Passphrase keys are stretched lazily, on first
    /// use, not here.
    public init(keys: [Key], allowPlaintext: Bool = false) throws(CloudSyncError) {
        guard !keys.isEmpty else {
            throw CloudSyncError(.config, "an encryption codec needs at least one key")
        }
        var seen = Set<String>()
        for key in keys where !seen.insert(key.id).inserted {
            throw CloudSyncError(.config, "two keys share the id \(key.id); key ids must be unique")
        }
        self.keys = keys
        self.allowPlaintext = allowPlaintext
    }

    /// The envelope of `value` under the ring's first key, bound to `storeKey`: a fresh random nonce each call, so
    /// encoding the same value twice gives different envelopes.
    ///
    /// A passphrase key is stretched with Argon2id on its first use and remembered. Throws a ``DecodeFailure``
    /// (`malformed`) when that derivation fails or its limits are beyond what is allowed, or libsodium's error when
    /// encryption fails.
    public func encode(_ value: String, key storeKey: String) throws -> String {
        let current = keys[0]
        let kdf: String
        let secret: SecretBytes
        switch current.material {
        case .raw(let bytes):
            kdf = "raw"
            secret = bytes
        case .passphrase(let passphrase, let limits, let salt):
            kdf = "argon2id13.\(limits.operations).\(limits.memoryBytes).\(Base64URL.encode(salt))"
            secret = try derive(passphrase, limits: limits, salt: salt, kdf: kdf, keyID: current.id)
        }
        let header = "\(Self.prefix)\(current.id):\(kdf):"
        // One pass each: the value's own UTF-8 bytes are sealed into one nonce-and-ciphertext buffer, which is
        // base64-encoded straight after the header.
        var value = value
        let box = try value.withUTF8 { plaintext in
            try XChaCha20Poly1305.sealCombined(plaintext, key: secret, associatedData: Array((header + storeKey).utf8))
        }
        return Base64URL.encode(box, after: header)
    }

    /// The value inside envelope `stored`, checked against `storeKey`; with ``allowPlaintext``, a value that is not an
    /// envelope is returned as it is.
    ///
    /// Throws a ``DecodeFailure``: `notAnEnvelope` (without ``allowPlaintext``), `malformed` (broken fields, bad or
    /// excessive key-derivation parameters, or plaintext that is not UTF-8), `unknownKeyID`, or `wrongKeyOrTampered`
    /// when authentication fails (the wrong key or passphrase, or the envelope was edited or moved to another store
    /// key).
    public func decode(_ stored: String, key storeKey: String) throws -> String {
        guard stored.hasPrefix(Self.prefix) else {
            if allowPlaintext { return stored }
            throw DecodeFailure(
                reason: .notAnEnvelope,
                description: "the value is not an encrypted envelope (it does not start with \"cs1:\"); allow "
                    + "plaintext in the codec to read it, for example to encrypt an existing store")
        }
        // The header is ASCII up to the third colon; the rest, base64, is read in place from the string's UTF-8.
        var stored = stored
        let malformed = DecodeFailure(
            reason: .malformed, description: "the envelope is malformed (truncated or edited)")
        let (keyID, kdf, payload) = try stored.withUTF8 { bytes throws -> (String, String, [UInt8]) in
            let colon = UInt8(ascii: ":")
            let start = Self.prefix.utf8.count
            guard let idEnd = bytes[start...].firstIndex(of: colon),
                let kdfEnd = bytes[(idEnd + 1)...].firstIndex(of: colon),
                let payload = Base64URL.decode(UnsafeBufferPointer(rebasing: bytes[(kdfEnd + 1)...])),
                payload.count >= XChaCha20Poly1305.nonceByteCount + XChaCha20Poly1305.tagByteCount
            else { throw malformed }
            return (
                String(decoding: bytes[start..<idEnd], as: UTF8.self),
                String(decoding: bytes[(idEnd + 1)..<kdfEnd], as: UTF8.self), payload
            )
        }
        guard let key = keys.first(where: { $0.id == keyID }) else {
            throw DecodeFailure(
                reason: .unknownKeyID,
                description: "the value was encrypted with key id \"\(keyID)\", which is not in the key ring")
        }
        let secret = try secret(for: key, kdf: kdf)
        let header = "\(Self.prefix)\(keyID):\(kdf):"
        let plaintext: [UInt8]
        do {
            plaintext = try payload.withUnsafeBufferPointer { combined in
                try XChaCha20Poly1305.openCombined(
                    combined, key: secret, associatedData: Array((header + storeKey).utf8))
            }
        } catch {
            throw DecodeFailure(
                reason: .wrongKeyOrTampered,
                description: "key \"\(keyID)\" does not open the envelope: the wrong key or passphrase, or the value "
                    + "was modified or copied from another key")
        }
        guard let text = String(validating: plaintext, as: UTF8.self) else {
            throw DecodeFailure(reason: .malformed, description: "the decrypted value is not UTF-8 text")
        }
        return text
    }

    /// An envelope already under the current key needs no re-keying.
    public func isCurrent(_ stored: String) -> Bool {
        stored.hasPrefix("\(Self.prefix)\(keys[0].id):")
    }

    /// The key that opens an envelope with this `kdf` field under `key`.
    private func secret(for key: Key, kdf: String) throws -> SecretBytes {
        switch key.material {
        case .raw(let bytes):
            guard kdf == "raw" else {
                throw DecodeFailure(
                    reason: .malformed,
                    description: "the envelope was made from a passphrase but key \"\(key.id)\" is a raw key here")
            }
            return bytes
        case .passphrase(let passphrase, _, _):
            let parts = kdf.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0] == "argon2id13", let operations = UInt64(parts[1]),
                let memory = Int(parts[2]), let salt = Base64URL.decode(String(parts[3])),
                salt.count == Argon2id.saltByteCount
            else {
                throw DecodeFailure(
                    reason: .malformed,
                    description: "the envelope's key derivation field is not argon2id13.<ops>.<memory>.<salt>, "
                        + "but key \"\(key.id)\" is a passphrase")
            }
            return try derive(
                passphrase, limits: Argon2id.Limits(operations: operations, memoryBytes: memory), salt: salt, kdf: kdf,
                keyID: key.id)
        }
    }

    /// Argon2id is slow on purpose: each (key, parameters, salt) is derived once and remembered.
    private func derive(_ passphrase: SecretBytes, limits: Argon2id.Limits, salt: [UInt8], kdf: String, keyID: String)
        throws -> SecretBytes
    {
        let cacheKey = "\(keyID):\(kdf)"
        if let known = derived.withLock({ $0[cacheKey] }) { return known }
        // Refuse absurd recorded parameters instead of letting a crafted envelope demand gigabytes.
        guard limits.memoryBytes <= Argon2id.Limits.sensitive.memoryBytes, limits.operations <= 16 else {
            throw DecodeFailure(
                reason: .malformed, description: "the envelope asks for Argon2id limits beyond what is allowed")
        }
        do {
            let key = try Argon2id.deriveKey(passphrase: passphrase, salt: salt, limits: limits)
            derived.withLock { $0[cacheKey] = key }
            return key
        } catch {
            throw DecodeFailure(reason: .malformed, description: "key derivation failed: \(error.message)")
        }
    }
}
