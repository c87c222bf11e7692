import CloudSyncOpenSSL
import Foundation
import Testing

@Suite struct SHA1Tests {
    // FIPS 180 examples (RFC 3174 section 7.3) and the empty message.
    @Test(arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
    ])
    func standardVectors(message: String, digest: String) {
        let bytes = SHA1.hash(Array(message.utf8))
        #expect(bytes.count == SHA1.byteCount)
        #expect(bytes.map { String(format: "%02x", $0) }.joined() == digest)
    }
}
