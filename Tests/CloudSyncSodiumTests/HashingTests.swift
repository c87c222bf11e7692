import CloudSyncSodium
import Testing

func bytes(_ hex: String) -> [UInt8] { Hex.decode(hex)! }
func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite struct HashingTests {
    // FIPS 180-2 examples.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func sha256Vectors(message: String, digest: String) {
        #expect(Hex.encode(SHA256.hash(ascii(message))) == digest)
    }

    @Test func sha256IncrementalEqualsOneShot() {
        var hasher = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { hasher.update(chunk) }
        #expect(Hex.encode(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    // RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (case 5 truncates its output, which this API does not).
    static let hmacVectors: [(key: [UInt8], data: [UInt8], mac: String)] = [
        (
            [UInt8](repeating: 0x0b, count: 20), ascii("Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            ascii("Jefe"), ascii("what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            Array(1...25), [UInt8](repeating: 0xcd, count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            [UInt8](repeating: 0xaa, count: 131), ascii("Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            [UInt8](repeating: 0xaa, count: 131),
            ascii(
                "This is a test using a larger than block-size key and a larger than block-size data. "
                    + "The key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ]

    @Test(arguments: 0..<hmacVectors.count)
    func hmacSHA256RFC4231(_ index: Int) {
        let vector = Self.hmacVectors[index]
        let key = SecretBytes(copying: vector.key)
        #expect(Hex.encode(HMACSHA256.authenticate(vector.data, key: key)) == vector.mac)

        var incremental = HMACSHA256(key: key)
        for byte in vector.data { incremental.update([byte]) }
        #expect(Hex.encode(incremental.finalize()) == vector.mac)

        #expect(HMACSHA256.isValid(bytes(vector.mac), for: vector.data, key: key))
        var tampered = bytes(vector.mac)
        tampered[0] ^= 1
        #expect(!HMACSHA256.isValid(tampered, for: vector.data, key: key))
    }

    // RFC 7693 appendix A (BLAKE2b-512 of "abc"); the shorter and keyed digests were checked against Python's hashlib.
    @Test func blake2bVectors() throws {
        #expect(
            Hex.encode(try BLAKE2b.hash(ascii("abc"), byteCount: 64))
                == "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923")
        #expect(
            Hex.encode(try BLAKE2b.hash(ascii("abc")))
                == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319")
        let key = SecretBytes(copying: Array(0..<32))
        #expect(
            Hex.encode(try BLAKE2b.hash(ascii("abc"), key: key))
                == "d63a32d3e44738d7907f964316c241adaba0abfeabc32349677578a15a203f7f")
    }

    @Test func blake2bRejectsLengthsOutsideItsRange() {
        let error = #expect(throws: SodiumError.self) { try BLAKE2b.hash(ascii("abc"), byteCount: 8) }
        #expect(error?.code == .invalidArgument)
        #expect(throws: SodiumError.self) { try BLAKE2b.hash(ascii("abc"), key: SecretBytes(copying: [1, 2, 3])) }
    }

    @Test func hexRoundTripAndRejection() {
        #expect(Hex.encode([0, 0x7f, 0xff]) == "007fff")
        #expect(Hex.decode("007FFF") == [0, 0x7f, 0xff])
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
        #expect(Hex.decode("00 11") == nil)
    }

    @Test func randomBytesDiffer() {
        let first = SecureRandom.bytes(count: 32)
        let second = SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect((0..<1000).allSatisfy { _ in SecureRandom.uniform(10) < 10 })
    }
}
