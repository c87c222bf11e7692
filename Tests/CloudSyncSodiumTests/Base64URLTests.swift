import CSodium
import CloudSync
import CloudSyncSodium
import CloudSyncTesting
import Testing

/// `Base64URL.decode` is a table of our own; libsodium's strict decoder is the reference it must agree with, on
/// every encoding and on every malformed text (but one kind, where libsodium is wrong).
@Suite struct Base64URLTests {
    /// What libsodium makes of `text`: the bytes, or nil when it refuses it.
    static func libsodiumDecode(_ text: [UInt8]) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: text.count / 4 * 3 + 3)
        var written = 0
        let status = text.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { characters in
                sodium_base642bin(
                    &output, output.count, characters.baseAddress, characters.count, nil, &written, nil,
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING)
            }
        }
        return status == 0 ? Array(output[..<written]) : nil
    }

    static func decode(_ text: [UInt8]) -> [UInt8]? { text.withUnsafeBufferPointer { Base64URL.decode($0) } }

    @Test(arguments: [1, 2, 3])
    func everyEncodingDecodesToItsBytes(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        for length in 0..<300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let text = Base64URL.encode(bytes)
            #expect(Base64URL.decode(text) == bytes, "\(length) bytes")
            #expect(Self.libsodiumDecode(Array(text.utf8)) == bytes)
        }
    }

    /// Texts near valid ones: encodings with one character changed (to another of the alphabet, one of the other
    /// alphabet, padding, whitespace, NUL or a byte above 127), one dropped or one added, so every rule (alphabet, lone
    /// last character, unused bits) is met both ways.
    @Test(arguments: [7, 8, 9])
    func malformedTextIsRefusedExactlyWhereLibsodiumRefusesIt(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let strangers: [UInt8] = Array("+/= \n\t.".utf8) + [0, 0x80, 0xC3, 0xFF]
        var (accepted, refused) = (0, 0)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...10, using: &random)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            var text = Array(Base64URL.encode(bytes).utf8)
            switch Int.random(in: 0..<4, using: &random) {
            case 0 where !text.isEmpty:
                text[Int.random(in: 0..<text.count, using: &random)] = alphabet.randomElement(using: &random)!
            case 1 where !text.isEmpty:
                text[Int.random(in: 0..<text.count, using: &random)] = strangers.randomElement(using: &random)!
            case 2 where !text.isEmpty: text.removeLast()
            case 3: text.append(alphabet.randomElement(using: &random)!)
            default: break
            }
            // libsodium reads the characters as signed `char`, and its arithmetic then takes some bytes above 127
            // (0xC3, 0xFF) for letters; they are outside the alphabet, and refused here.
            let expected = text.contains { $0 >= 0x80 } ? nil : Self.libsodiumDecode(text)
            #expect(Self.decode(text) == expected, "\(text)")
            if expected == nil { refused += 1 } else { accepted += 1 }
        }
        // Both kinds were tried: a rule never met either way would test nothing.
        #expect(accepted > 4_000 && refused > 4_000)
    }

    @Test func theRulesByExample() {
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
        // A lone last character, padding, the standard alphabet and leftover bits are each refused.
        for text in ["A", "AAAAA", "AA==", "+/8", "AB", "AAB"] { #expect(Base64URL.decode(text) == nil, "\(text)") }
        // Bytes outside ASCII are no base64 digits, though libsodium decodes this one to three bytes.
        let high: [UInt8] = [73, 97, 71, 0xC3]
        #expect(Self.libsodiumDecode(high)?.count == 3)
        #expect(Self.decode(high) == nil)
    }
}
