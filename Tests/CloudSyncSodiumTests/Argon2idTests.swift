import CloudSyncSodium
import Testing

@Suite struct Argon2idTests {
    // Published by the Argon2 reference implementation (phc-winner-argon2, src/test.c): password "password",
    // salt "somesalt", version 1.3, one lane. libsodium takes only 16-byte salts for raw derivation, so these
    // 8-byte-salt vectors are checked through the encoded-hash verifier, which runs the same Argon2id code.
    @Test(arguments: [
        "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
        "$argon2id$v=19$m=256,t=2,p=1$c29tZXNhbHQ$nf65EOgLrQMR/uIPnA4rEsF5h7TKyQwu9U1bMCHGi/4",
    ])
    func referenceVectors(encoded: String) {
        #expect(Argon2id.verify(encodedHash: encoded, passphrase: SecretBytes(utf8: "password")))
        #expect(!Argon2id.verify(encodedHash: encoded, passphrase: SecretBytes(utf8: "passwore")))
    }

    // Raw output for a 16-byte salt, computed with the Argon2 reference implementation through argon2-cffi's
    // hash_secret_raw(type=ID, time_cost=2, memory_cost=8192 KiB, parallelism=1, hash_len=32).
    @Test func rawDerivationMatchesTheReferenceImplementation() throws {
        let key = try Argon2id.deriveKey(
            passphrase: SecretBytes(utf8: "correct horse battery staple"), salt: Array(0..<16),
            limits: .init(operations: 2, memoryBytes: 8192 * 1024))
        let expected = SecretBytes(copying: bytes("a891dd91a3d123add6ea78ceedcc94a7f1dc1e4ca480e57e6f240a113662ea2f"))
        #expect(key == expected)
    }

    @Test func derivationDependsOnEveryInput() throws {
        let limits = Argon2id.Limits(operations: 1, memoryBytes: 64 * 1024)
        let salt = Array(repeating: UInt8(7), count: 16)
        let base = try Argon2id.deriveKey(passphrase: SecretBytes(utf8: "pass"), salt: salt, limits: limits)
        let again = try Argon2id.deriveKey(passphrase: SecretBytes(utf8: "pass"), salt: salt, limits: limits)
        #expect(base == again)
        var otherSalt = salt
        otherSalt[15] = 8
        #expect(
            base != (try Argon2id.deriveKey(passphrase: SecretBytes(utf8: "pass"), salt: otherSalt, limits: limits)))
        #expect(base != (try Argon2id.deriveKey(passphrase: SecretBytes(utf8: "pasS"), salt: salt, limits: limits)))
        let moreWork = Argon2id.Limits(operations: 2, memoryBytes: 64 * 1024)
        #expect(base != (try Argon2id.deriveKey(passphrase: SecretBytes(utf8: "pass"), salt: salt, limits: moreWork)))
    }

    @Test func badParametersAreRefused() {
        let passphrase = SecretBytes(utf8: "pass")
        let shortSalt = #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(passphrase: passphrase, salt: [1, 2, 3], limits: .interactive)
        }
        #expect(shortSalt?.message == "Argon2id needs a 16-byte salt, not 3 bytes")
        let tinyMemory = #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(
                passphrase: passphrase, salt: Array(repeating: 0, count: 16),
                limits: .init(operations: 2, memoryBytes: 1024))
        }
        #expect(tinyMemory?.code == .invalidArgument)
        #expect(throws: SodiumError.self) {
            try Argon2id.deriveKey(
                passphrase: passphrase, salt: Array(repeating: 0, count: 16), limits: .interactive, byteCount: 8)
        }
    }

    @Test func namedLimitsAreLibsodiums() {
        #expect(Argon2id.Limits.interactive == .init(operations: 2, memoryBytes: 64 << 20))
        #expect(Argon2id.Limits.moderate == .init(operations: 3, memoryBytes: 256 << 20))
        #expect(Argon2id.Limits.sensitive == .init(operations: 4, memoryBytes: 1 << 30))
    }
}
