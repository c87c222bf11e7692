internal import CSodium

/// Authenticated encryption with XChaCha20-Poly1305 (IETF construction, libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_*`): a 32-byte key, a 24-byte nonce that may be random, a 16-byte tag.
public enum XChaCha20Poly1305 {
    /// Key length in bytes.
    public static let keyByteCount = 32
    /// Nonce length in bytes; long enough for random nonces.
    public static let nonceByteCount = 24
    /// Length of the authentication tag appended to each ciphertext, in bytes.
    public static let tagByteCount = 16

    /// A nonce and the ciphertext with its tag appended.
    public struct SealedBox: Sendable, Equatable {
        /// The 24-byte nonce the plaintext was sealed with; public, but never to be reused with the same key.
        public let nonce: [UInt8]
        /// Ciphertext followed by the 16-byte tag.
        public let ciphertext: [UInt8]

        /// A box from its parts, such as read back from storage; opening it checks them.
        public init(nonce: [UInt8], ciphertext: [UInt8]) {
            self.nonce = nonce
            self.ciphertext = ciphertext
        }
    }

    /// A fresh random nonce; at 24 bytes, random nonces do not repeat in practice.
    public static func randomNonce() -> [UInt8] { SecureRandom.bytes(count: nonceByteCount) }

    /// Encrypts and authenticates `plaintext`, binding `associatedData` (authenticated, not encrypted).
    public static func seal(
        _ plaintext: [UInt8], key: SecretBytes, associatedData: [UInt8] = [], nonce: [UInt8] = randomNonce()
    ) throws(SodiumError) -> SealedBox {
        Sodium.ensureInitialized()
        try checkSizes(key: key, nonce: nonce)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var written: UInt64 = 0
        key.withUnsafeBytes { keyBytes in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                &ciphertext, &written, plaintext, UInt64(plaintext.count), associatedData,
                UInt64(associatedData.count), nil, nonce, keyBytes.sodiumInput)
        }
        ciphertext.removeSubrange(Int(written)...)
        return SealedBox(nonce: nonce, ciphertext: ciphertext)
    }

    /// Decrypts `box`, or throws if it does not authenticate.
    ///
    /// Throws ``SodiumError/Code/authenticationFailed`` if the key, the associated data or any byte of the box is
    /// not what sealed it. Never returns unauthenticated bytes.
    public static func open(
        _ box: SealedBox, key: SecretBytes, associatedData: [UInt8] = []
    ) throws(SodiumError) -> [UInt8] {
        Sodium.ensureInitialized()
        try checkSizes(key: key, nonce: box.nonce)
        guard box.ciphertext.count >= tagByteCount else {
            throw SodiumError(.authenticationFailed, "ciphertext is shorter than its authentication tag")
        }
        var plaintext = [UInt8](repeating: 0, count: box.ciphertext.count - tagByteCount)
        var written: UInt64 = 0
        let status = key.withUnsafeBytes { keyBytes in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &plaintext, &written, nil, box.ciphertext, UInt64(box.ciphertext.count), associatedData,
                UInt64(associatedData.count), box.nonce, keyBytes.sodiumInput)
        }
        guard status == 0 else {
            throw SodiumError(
                .authenticationFailed,
                "decryption failed: wrong key, wrong associated data, or the ciphertext was modified")
        }
        plaintext.removeSubrange(Int(written)...)
        return plaintext
    }

    private static func checkSizes(key: SecretBytes, nonce: [UInt8]) throws(SodiumError) {
        guard key.count == keyByteCount else {
            throw SodiumError(.invalidArgument, "XChaCha20-Poly1305 needs a 32-byte key, not \(key.count) bytes")
        }
        guard nonce.count == nonceByteCount else {
            throw SodiumError(
                .invalidArgument, "XChaCha20-Poly1305 needs a 24-byte nonce, not \(nonce.count) bytes")
        }
    }
}
