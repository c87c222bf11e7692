internal import CCrypto
import Foundation

/// SHA-1 (FIPS 180-4) through OpenSSL's libcrypto, for checksums other services report (Drive's `sha1Checksum`);
/// never for security.
package enum SHA1 {
    /// Digest length in bytes.
    package static let byteCount = 20

    /// The SHA-1 digest of `bytes`, 20 bytes.
    package static func hash(_ bytes: some ContiguousBytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let succeeded = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha1(), nil) == 1
        }
        guard succeeded else {
            // Only an exhausted heap or a libcrypto built without SHA-1 gets here.
            fatalError("libcrypto cannot compute SHA-1 (out of memory, or SHA-1 disabled in its configuration)")
        }
        return Array(digest.prefix(Int(length)))
    }
}
