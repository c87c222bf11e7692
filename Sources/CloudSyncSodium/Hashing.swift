internal import CSodium
import Foundation

/// SHA-256 (FIPS 180-4), one-shot or incremental.
public struct SHA256: Sendable {
    /// Digest length in bytes.
    public static let byteCount = 32
    private var state = crypto_hash_sha256_state()

    /// A hasher that has seen no bytes yet.
    public init() {
        Sodium.ensureInitialized()
        crypto_hash_sha256_init(&state)
    }

    /// Feeds `bytes` to the hash; the digest is the same however the input is split across calls.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { input in
            _ = crypto_hash_sha256_update(&state, input.sodiumInput, UInt64(input.count))
        }
    }

    /// The digest.
    ///
    /// The hasher must not be updated afterwards.
    public mutating func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Self.byteCount)
        crypto_hash_sha256_final(&state, &digest)
        return digest
    }

    /// The SHA-256 digest of `bytes`, 32 bytes.
    public static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }
}

/// HMAC-SHA-256 (RFC 2104) with a key of any length, one-shot or incremental.
public struct HMACSHA256: Sendable {
    /// MAC length in bytes.
    public static let byteCount = 32
    private var state = crypto_auth_hmacsha256_state()

    /// An authenticator keyed with `key`, which may be any length (a key over 64 bytes is hashed first, per HMAC).
    public init(key: SecretBytes) {
        Sodium.ensureInitialized()
        key.withUnsafeBytes { keyBytes in
            _ = crypto_auth_hmacsha256_init(
                &state, keyBytes.sodiumInput, keyBytes.count)
        }
    }

    /// Feeds `bytes` to the MAC; the result is the same however the message is split across calls.
    public mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { input in
            _ = crypto_auth_hmacsha256_update(
                &state, input.sodiumInput, UInt64(input.count))
        }
    }

    /// The MAC.
    ///
    /// The authenticator must not be updated afterwards.
    public mutating func finalize() -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: Self.byteCount)
        crypto_auth_hmacsha256_final(&state, &mac)
        // The state holds key-derived pads; clear them.
        withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) }
        return mac
    }

    /// The HMAC-SHA-256 of `message` under `key`, 32 bytes; check a received MAC with ``isValid(_:for:key:)``, which
    /// compares in constant time.
    public static func authenticate(_ message: some ContiguousBytes, key: SecretBytes) -> [UInt8] {
        var authenticator = HMACSHA256(key: key)
        authenticator.update(message)
        return authenticator.finalize()
    }

    /// Whether `mac` is the MAC of `message` under `key`, compared in constant time.
    public static func isValid(_ mac: [UInt8], for message: some ContiguousBytes, key: SecretBytes) -> Bool {
        constantTimeEquals(mac, authenticate(message, key: key))
    }
}

/// BLAKE2b (RFC 7693) through libsodium's `crypto_generichash`: fast, optionally keyed.
public enum BLAKE2b {
    /// Allowed digest lengths, in bytes.
    public static let byteCountRange = 16...64
    /// Allowed key lengths, in bytes, when a key is given.
    public static let keyByteCountRange = 16...64

    /// The BLAKE2b digest of `bytes`, `byteCount` bytes long (16 to 64, default 32), keyed with `key` when given (16 to
    /// 64 bytes).
    ///
    /// Throws ``SodiumError/Code/invalidArgument`` when the digest or key length is outside those ranges.
    public static func hash(
        _ bytes: some ContiguousBytes, byteCount: Int = 32, key: SecretBytes? = nil
    ) throws(SodiumError) -> [UInt8] {
        Sodium.ensureInitialized()
        guard byteCountRange.contains(byteCount) else {
            throw SodiumError(.invalidArgument, "BLAKE2b digest length must be 16...64 bytes, not \(byteCount)")
        }
        if let key, !keyByteCountRange.contains(key.count) {
            throw SodiumError(.invalidArgument, "BLAKE2b key length must be 16...64 bytes, not \(key.count)")
        }
        var digest = [UInt8](repeating: 0, count: byteCount)
        bytes.withUnsafeBytes { input in
            let inputPointer = input.sodiumInput
            if let key {
                key.withUnsafeBytes { keyBytes in
                    _ = crypto_generichash(
                        &digest, byteCount, inputPointer, UInt64(input.count),
                        keyBytes.sodiumInput, keyBytes.count)
                }
            } else {
                _ = crypto_generichash(&digest, byteCount, inputPointer, UInt64(input.count), nil, 0)
            }
        }
        return digest
    }
}

extension BLAKE2b {
    /// Writes the unkeyed BLAKE2b digest of `bytes` into `digest`, whose length (16 to 64 bytes) is the digest's: for
    /// hashing in a loop without allocating.
    public static func hash(_ bytes: UnsafeRawBufferPointer, into digest: UnsafeMutableRawBufferPointer) {
        precondition(byteCountRange.contains(digest.count), "BLAKE2b digest length must be 16...64 bytes")
        Sodium.ensureInitialized()
        _ = crypto_generichash(
            digest.baseAddress!.assumingMemoryBound(to: UInt8.self), digest.count, bytes.sodiumInput,
            UInt64(bytes.count), nil, 0)
    }
}

/// Lower-case hexadecimal, encoded and decoded in constant time by libsodium.
public enum Hex {
    /// The bytes as lower-case hexadecimal, two digits a byte.
    public static func encode(_ bytes: [UInt8]) -> String {
        // Written straight into the string's storage; libsodium's terminator takes the one spare byte.
        String(unsafeUninitializedCapacity: bytes.count * 2 + 1) { output in
            bytes.withUnsafeBytes { encode($0, into: UnsafeMutableRawBufferPointer(output)) }
            return bytes.count * 2
        }
    }

    /// Writes `bytes` as lower-case hexadecimal into `text`, which takes two digits a byte and one byte more for the
    /// terminator libsodium writes after them: for encoding in a loop without allocating.
    public static func encode(_ bytes: UnsafeRawBufferPointer, into text: UnsafeMutableRawBufferPointer) {
        precondition(text.count > bytes.count * 2, "hexadecimal needs two digits a byte and a terminator")
        Sodium.ensureInitialized()
        _ = sodium_bin2hex(
            text.baseAddress!.assumingMemoryBound(to: CChar.self), text.count, bytes.sodiumInput, bytes.count)
    }

    /// The bytes `text` spells, or nil when it is not an even number of hexadecimal digits.
    public static func decode(_ text: String) -> [UInt8]? {
        Sodium.ensureInitialized()
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: digits.count / 2)
        var written = 0
        // With no end pointer, libsodium fails unless it consumed every character.
        let status = digits.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { chars in
                sodium_hex2bin(&bytes, bytes.count, chars.baseAddress, chars.count, nil, &written, nil)
            }
        }
        guard status == 0, written == bytes.count else { return nil }
        return bytes
    }
}

/// URL-safe base64 without padding (RFC 4648 §5), for public bytes such as nonces and ciphertexts: encoded by
/// libsodium in constant time (a PKCE verifier is encoded here before it is sent), decoded by a table.
public enum Base64URL {
    /// The bytes as URL-safe base64 (`-` and `_`) without `=` padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        Sodium.ensureInitialized()
        let variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING
        // The encoded length counts the C terminator, which the string does not keep.
        let capacity = sodium_base64_encoded_len(bytes.count, variant)
        return String(unsafeUninitializedCapacity: capacity) { output in
            bytes.withUnsafeBytes { input in
                _ = sodium_bin2base64(
                    UnsafeMutableRawPointer(output.baseAddress!).assumingMemoryBound(to: CChar.self), capacity,
                    input.sodiumInput, input.count, variant)
            }
            return capacity - 1
        }
    }

    /// `prefix` followed by the bytes as URL-safe base64 without padding, built in one allocation.
    public static func encode(_ bytes: [UInt8], after prefix: String) -> String {
        Sodium.ensureInitialized()
        let variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING
        var prefix = prefix
        return prefix.withUTF8 { head in
            let capacity = head.count + sodium_base64_encoded_len(bytes.count, variant)
            return String(unsafeUninitializedCapacity: capacity) { output in
                _ = UnsafeMutableBufferPointer(rebasing: output[..<head.count]).initialize(from: head)
                bytes.withUnsafeBytes { input in
                    _ = sodium_bin2base64(
                        UnsafeMutableRawPointer(output.baseAddress! + head.count).assumingMemoryBound(to: CChar.self),
                        capacity - head.count, input.sodiumInput, input.count, variant)
                }
                return capacity - 1
            }
        }
    }

    /// The bytes the base64 characters in `characters` encode, or nil when they are not URL-safe base64 without
    /// padding.
    ///
    /// Strict as libsodium's decoder is: no padding, whitespace or other characters, no lone last character, and the
    /// unused low bits of the last character zero, so each byte string has exactly one encoding. Unlike it, the work
    /// depends on the characters (a table lookup each), which is why this is for public bytes only; it decodes an
    /// envelope's payload several times faster. Secret keys are decoded by libsodium (``KeyFile``).
    public static func decode(_ characters: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = characters.count
        // A last group of one character holds six bits, not a byte.
        guard count % 4 != 1 else { return nil }
        let whole = count / 4
        let tail = count % 4
        let length = whole * 3 + (tail == 0 ? 0 : tail - 1)
        var valid = true
        let bytes = [UInt8](unsafeUninitializedCapacity: length) { output, initialized in
            guard let input = characters.baseAddress, let out = output.baseAddress else { return }
            Base64URLTable.values.withUnsafeBufferPointer { table in
                // Each sextet is 0...63; a character outside the alphabet maps to 0xFF, and one OR over the group
                // catches any.
                var read = 0
                var written = 0
                for _ in 0..<whole {
                    let a = table[Int(input[read])]
                    let b = table[Int(input[read + 1])]
                    let c = table[Int(input[read + 2])]
                    let d = table[Int(input[read + 3])]
                    if (a | b | c | d) & 0xC0 != 0 {
                        valid = false
                        return
                    }
                    out[written] = a << 2 | b >> 4
                    out[written + 1] = b << 4 | c >> 2
                    out[written + 2] = c << 6 | d
                    read += 4
                    written += 3
                }
                if tail >= 2 {
                    let a = table[Int(input[read])]
                    let b = table[Int(input[read + 1])]
                    let c = tail == 3 ? table[Int(input[read + 2])] : 0
                    // The bits past the last whole byte must be zero.
                    let unused = tail == 2 ? b & 0x0F : c & 0x03
                    if (a | b | c) & 0xC0 != 0 || unused != 0 {
                        valid = false
                        return
                    }
                    out[written] = a << 2 | b >> 4
                    if tail == 3 { out[written + 1] = b << 4 | c >> 2 }
                }
            }
            initialized = valid ? length : 0
        }
        return valid ? bytes : nil
    }

    /// The bytes `text` encodes, or nil when it is not URL-safe base64 without padding.
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }
}

/// Each byte's sextet in URL-safe base64 (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`), 0xFF for any other byte.
private enum Base64URLTable {
    static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()
}
