internal import CCrypto
import Foundation

/// MD5 (RFC 1321) through OpenSSL's libcrypto, for the integrity headers S3 requires (`Content-MD5`); never for
/// security.
package struct MD5: ~Copyable {
    /// Digest length in bytes.
    package static let byteCount = 16
    private let context: OpaquePointer

    /// A hasher that has seen no bytes yet.
    package init() {
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_md5(), nil) == 1 else {
            // Only an exhausted heap or a libcrypto built without MD5 (a FIPS-only configuration) gets here.
            fatalError("libcrypto cannot compute MD5 (out of memory, or MD5 disabled in its configuration)")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Feeds `bytes` to the hash; the digest is the same however the input is split across calls.
    package mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { input in
            _ = EVP_DigestUpdate(context, input.baseAddress, input.count)
        }
    }

    /// The digest; the hasher is used up.
    package consuming func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = EVP_DigestFinal_ex(context, &digest, &length)
        return Array(digest.prefix(Int(length)))
    }

    /// The MD5 digest of `bytes`, 16 bytes.
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var hasher = MD5()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The base64 of the digest of `bytes`, as the `Content-MD5` header carries it (RFC 1864).
    package static func contentMD5(_ bytes: some ContiguousBytes) -> String {
        Data(hash(bytes)).base64EncodedString()
    }
}
