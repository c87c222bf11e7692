import CloudSyncSodium
import Testing

@Suite struct XChaCha20Poly1305Tests {
    let key = SecretBytes.random(count: XChaCha20Poly1305.keyByteCount)
    let plaintext = Array("the favourite colour is teal".utf8)
    let associatedData = Array("v1|settings.theme".utf8)

    // draft-irtf-cfrg-xchacha-03, appendix A.3.1 (also checked with PyCryptodome).
    @Test func publishedVector() throws {
        let key = SecretBytes(copying: Array(0x80...0x9f))
        let nonce = Array(UInt8(0x40)...UInt8(0x57))
        let aad = bytes("50515253c0c1c2c3c4c5c6c7")
        let message = ascii(
            "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
                + "sunscreen would be it.")
        let box = try XChaCha20Poly1305.seal(message, key: key, associatedData: aad, nonce: nonce)
        let expected =
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39"
            + "ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
            + "21f9664c97637da9768812f615c68b13b52e" + "c0875924c1c7987947deafd8780acf49"
        #expect(Hex.encode(box.ciphertext) == expected)
        #expect(try XChaCha20Poly1305.open(box, key: key, associatedData: aad) == message)
    }

    @Test func sealOpenRoundTrip() throws {
        let box = try XChaCha20Poly1305.seal(plaintext, key: key, associatedData: associatedData)
        #expect(box.nonce.count == 24)
        #expect(box.ciphertext.count == plaintext.count + 16)
        #expect(try XChaCha20Poly1305.open(box, key: key, associatedData: associatedData) == plaintext)
    }

    @Test func emptyPlaintextRoundTrips() throws {
        let box = try XChaCha20Poly1305.seal([], key: key)
        #expect(box.ciphertext.count == 16)
        #expect(try XChaCha20Poly1305.open(box, key: key) == [])
    }

    @Test func eachSealUsesAFreshNonce() throws {
        let first = try XChaCha20Poly1305.seal(plaintext, key: key)
        let second = try XChaCha20Poly1305.seal(plaintext, key: key)
        #expect(first.nonce != second.nonce)
        #expect(first.ciphertext != second.ciphertext)
    }

    @Test func wrongKeyThrows() throws {
        let box = try XChaCha20Poly1305.seal(plaintext, key: key, associatedData: associatedData)
        let other = SecretBytes.random(count: 32)
        let error = #expect(throws: SodiumError.self) {
            try XChaCha20Poly1305.open(box, key: other, associatedData: associatedData)
        }
        #expect(error?.code == .authenticationFailed)
    }

    @Test func wrongAssociatedDataThrows() throws {
        let box = try XChaCha20Poly1305.seal(plaintext, key: key, associatedData: associatedData)
        let error = #expect(throws: SodiumError.self) {
            try XChaCha20Poly1305.open(box, key: key, associatedData: Array("v1|settings.other".utf8))
        }
        #expect(error?.code == .authenticationFailed)
    }

    @Test func everyFlippedBitThrows() throws {
        let box = try XChaCha20Poly1305.seal(plaintext, key: key, associatedData: associatedData)
        for bit in 0..<(box.ciphertext.count * 8) {
            var ciphertext = box.ciphertext
            ciphertext[bit / 8] ^= UInt8(1) << (bit % 8)
            let tampered = XChaCha20Poly1305.SealedBox(nonce: box.nonce, ciphertext: ciphertext)
            #expect(throws: SodiumError.self) {
                try XChaCha20Poly1305.open(tampered, key: key, associatedData: associatedData)
            }
        }
        var nonce = box.nonce
        nonce[5] ^= 0x10
        #expect(throws: SodiumError.self) {
            try XChaCha20Poly1305.open(
                .init(nonce: nonce, ciphertext: box.ciphertext), key: key, associatedData: associatedData)
        }
    }

    @Test func truncatedCiphertextThrows() {
        let box = XChaCha20Poly1305.SealedBox(nonce: XChaCha20Poly1305.randomNonce(), ciphertext: [1, 2, 3])
        let error = #expect(throws: SodiumError.self) { try XChaCha20Poly1305.open(box, key: key) }
        #expect(error?.code == .authenticationFailed)
    }

    @Test func wrongSizesAreRefused() {
        let shortKey = SecretBytes.random(count: 16)
        let error = #expect(throws: SodiumError.self) { try XChaCha20Poly1305.seal(plaintext, key: shortKey) }
        #expect(error?.code == .invalidArgument)
        #expect(throws: SodiumError.self) { try XChaCha20Poly1305.seal(plaintext, key: key, nonce: [1, 2, 3]) }
    }
}
