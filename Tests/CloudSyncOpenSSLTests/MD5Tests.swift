import CloudSyncOpenSSL
import Foundation
import Testing

@Suite struct MD5Tests {
    // RFC 1321, appendix A.5.
    @Test(arguments: [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a"
        ),
    ])
    func rfc1321Vectors(message: String, digest: String) {
        let hex = MD5.hash(Array(message.utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(hex == digest)
    }

    @Test func incrementalEqualsOneShotAndContentMD5IsBase64() {
        var hasher = MD5()
        for piece in ["1234567890", "1234567890123456789012345678901234567890", "123456789012345678901234567890"] {
            hasher.update(Array(piece.utf8))
        }
        let whole = Array(String(repeating: "1234567890", count: 8).utf8)
        #expect(hasher.finalize() == MD5.hash(whole))
        // RFC 1864's form: base64 of the 16 bytes; the empty body's is well known from S3's documentation.
        #expect(MD5.contentMD5([UInt8]()) == "1B2M2Y8AsgTpgAmY7PhCfg==")
    }
}
