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

    /// Encrypts `plaintext` under a fresh random nonce into one buffer: the nonce, then the ciphertext with its tag.
    ///
    /// The same box as ``seal(_:key:associatedData:nonce:)`` in one allocation, read straight from the caller's
    /// bytes, for callers that store the parts together.
    public static func sealCombined(
        _ plaintext: UnsafeBufferPointer<UInt8>, key: SecretBytes, associatedData: [UInt8]
    ) throws(SodiumError) -> [UInt8] {
        Sodium.ensureInitialized()
        guard key.count == keyByteCount else {
            throw SodiumError(.invalidArgument, "key must be \(keyByteCount) bytes, got \(key.count)")
        }
        let count = nonceByteCount + plaintext.count + tagByteCount
        return [UInt8](unsafeUninitializedCapacity: count) { combined, initialized in
            let base = combined.baseAddress!
            randombytes_buf(base, nonceByteCount)
            var written: UInt64 = 0
            key.withUnsafeBytes { keyBytes in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                    base + nonceByteCount, &written, plaintext.baseAddress ?? UnsafePointer(base),
                    UInt64(plaintext.count),
                    associatedData, UInt64(associatedData.count), nil, base, keyBytes.sodiumInput)
            }
            initialized = nonceByteCount + Int(written)
        }
    }

    /// Decrypts a box laid out as ``sealCombined(_:key:associatedData:)`` makes it (nonce, ciphertext, tag), or
    /// throws if it is too short or does not authenticate.
    public static func openCombined(
        _ combined: UnsafeBufferPointer<UInt8>, key: SecretBytes, associatedData: [UInt8]
    ) throws(SodiumError) -> [UInt8] {
        Sodium.ensureInitialized()
        guard key.count == keyByteCount else {
            throw SodiumError(.invalidArgument, "key must be \(keyByteCount) bytes, got \(key.count)")
        }
        guard combined.count >= nonceByteCount + tagByteCount, let base = combined.baseAddress else {
            throw SodiumError(.authenticationFailed, "the box is shorter than its nonce and authentication tag")
        }
        var status: Int32 = 0
        let plaintext = [UInt8](unsafeUninitializedCapacity: combined.count - nonceByteCount - tagByteCount) {
            plaintext, initialized in
            var written: UInt64 = 0
            status = key.withUnsafeBytes { keyBytes in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    plaintext.baseAddress, &written, nil, base + nonceByteCount,
                    UInt64(combined.count - nonceByteCount), associatedData, UInt64(associatedData.count), base,
                    keyBytes.sodiumInput)
            }
            initialized = status == 0 ? Int(written) : 0
        }
        guard status == 0 else {
            throw SodiumError(
                .authenticationFailed,
                "decryption failed: wrong key, wrong associated data, or the ciphertext was modified")
        }
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
