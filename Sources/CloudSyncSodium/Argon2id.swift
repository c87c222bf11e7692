internal import CSodium

/// Argon2id (RFC 9106, version 1.3, one lane) through libsodium's `crypto_pwhash`: stretches a passphrase into a key.
public enum Argon2id {
    /// Salt length libsodium requires.
    public static let saltByteCount = 16

    /// The work a derivation does: passes over memory, and memory in bytes.
    public struct Limits: Sendable, Equatable, Codable {
        /// Passes over memory (libsodium's `opslimit`); at least 1.
        public var operations: UInt64
        /// Memory the derivation uses, in bytes (libsodium's `memlimit`); at least 8 KiB.
        public var memoryBytes: Int

        /// Limits of `operations` passes over `memoryBytes` bytes, unchecked here: ``validate()`` or a derivation
        /// refuses values outside libsodium's range.
        public init(operations: UInt64, memoryBytes: Int) {
            self.operations = operations
            self.memoryBytes = memoryBytes
        }

        /// libsodium's interactive limits (2 passes, 64 MiB): well under a second.
        public static var interactive: Limits {
            Limits(
                operations: UInt64(crypto_pwhash_argon2id_opslimit_interactive()),
                memoryBytes: crypto_pwhash_argon2id_memlimit_interactive())
        }

        /// libsodium's moderate limits (3 passes, 256 MiB).
        public static var moderate: Limits {
            Limits(
                operations: UInt64(crypto_pwhash_argon2id_opslimit_moderate()),
                memoryBytes: crypto_pwhash_argon2id_memlimit_moderate())
        }

        /// libsodium's sensitive limits (4 passes, 1 GiB): several seconds.
        public static var sensitive: Limits {
            Limits(
                operations: UInt64(crypto_pwhash_argon2id_opslimit_sensitive()),
                memoryBytes: crypto_pwhash_argon2id_memlimit_sensitive())
        }

        /// Throws unless libsodium accepts these limits.
        public func validate() throws(SodiumError) {
            let operationsRange =
                UInt64(crypto_pwhash_argon2id_opslimit_min())...UInt64(crypto_pwhash_argon2id_opslimit_max())
            let memoryRange = crypto_pwhash_argon2id_memlimit_min()...crypto_pwhash_argon2id_memlimit_max()
            guard operationsRange.contains(operations) else {
                throw SodiumError(
                    .invalidArgument,
                    "Argon2id operations limit \(operations) is outside \(operationsRange.lowerBound)...\(operationsRange.upperBound)"
                )
            }
            guard memoryRange.contains(memoryBytes) else {
                throw SodiumError(
                    .invalidArgument,
                    "Argon2id memory limit \(memoryBytes) bytes is outside \(memoryRange.lowerBound)...\(memoryRange.upperBound)"
                )
            }
        }
    }

    /// Derives `byteCount` bytes from `passphrase` and a 16-byte `salt`.
    public static func deriveKey(
        passphrase: SecretBytes, salt: [UInt8], limits: Limits, byteCount: Int = 32
    ) throws(SodiumError) -> SecretBytes {
        Sodium.ensureInitialized()
        guard salt.count == saltByteCount else {
            throw SodiumError(.invalidArgument, "Argon2id needs a 16-byte salt, not \(salt.count) bytes")
        }
        guard byteCount >= Int(crypto_pwhash_argon2id_bytes_min()) else {
            throw SodiumError(.invalidArgument, "Argon2id output must be at least 16 bytes, not \(byteCount)")
        }
        try limits.validate()
        var status: Int32 = 0
        let key = SecretBytes(count: byteCount) { output in
            status = passphrase.withUnsafeBytes { secret in
                crypto_pwhash_argon2id(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(byteCount),
                    secret.sodiumText, UInt64(secret.count), salt,
                    limits.operations, limits.memoryBytes, crypto_pwhash_argon2id_alg_argon2id13())
            }
        }
        guard status == 0 else {
            throw SodiumError(
                .derivationFailed,
                "Argon2id derivation failed; the memory limit (\(limits.memoryBytes) bytes) may exceed what is available"
            )
        }
        return key
    }

    /// Whether `passphrase` matches an encoded hash in the PHC string format (`$argon2id$v=19$m=...,t=...,p=1$salt$hash`).
    public static func verify(encodedHash: String, passphrase: SecretBytes) -> Bool {
        Sodium.ensureInitialized()
        return passphrase.withUnsafeBytes { secret in
            crypto_pwhash_argon2id_str_verify(
                encodedHash, secret.sodiumText, UInt64(secret.count)) == 0
        }
    }
}
