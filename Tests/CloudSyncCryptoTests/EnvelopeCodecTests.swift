import CloudSync
import CloudSyncCrypto
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

/// Fast Argon2id limits for tests; real keys default to libsodium's interactive limits.
let quickLimits = Argon2id.Limits(operations: 1, memoryBytes: 64 * 1024)

func rawKey(_ id: String) throws -> EnvelopeCodec.Key { try .raw(id: id, SecretBytes.random(count: 32)) }

@Suite struct EnvelopeCodecTests {
    let codec: EnvelopeCodec
    init() throws { codec = try EnvelopeCodec(keys: [rawKey("k2026")]) }

    @Test(arguments: ["", "plain", "héllo wörld — 日本 🌍\u{0}", String(repeating: "0123456789abcdef", count: 65_536)])
    func roundTrips(_ value: String) throws {
        let envelope = try codec.encode(value, key: "settings.theme")
        #expect(envelope.hasPrefix("cs1:k2026:raw:"))
        #expect(!envelope.contains(value.isEmpty ? "\u{1}" : value))
        #expect(try codec.decode(envelope, key: "settings.theme") == value)
    }

    @Test func eachEncodingUsesAFreshNonce() throws {
        #expect(try codec.encode("same", key: "k") != codec.encode("same", key: "k"))
    }

    private func failure(_ stored: String, key: String = "settings.theme", codec: EnvelopeCodec? = nil) -> EnvelopeCodec
        .DecodeFailure?
    {
        #expect(throws: EnvelopeCodec.DecodeFailure.self) { try (codec ?? self.codec).decode(stored, key: key) }
        do {
            _ = try (codec ?? self.codec).decode(stored, key: key)
            return nil
        } catch { return error as? EnvelopeCodec.DecodeFailure }
    }

    @Test func theWrongKeyFails() throws {
        let envelope = try codec.encode("v", key: "k")
        let other = try EnvelopeCodec(keys: [rawKey("k2026")])
        #expect(failure(envelope, key: "k", codec: other)?.reason == .wrongKeyOrTampered)
    }

    @Test func aFlippedBitAnywhereFails() throws {
        let envelope = try codec.encode("the value", key: "k")
        let prefix = "cs1:k2026:raw:"
        var bytes = Base64URL.decode(String(envelope.dropFirst(prefix.count)))!
        for index in bytes.indices {
            for bit in [0, 7] {
                bytes[index] ^= 1 << bit
                #expect(failure(prefix + Base64URL.encode(bytes), key: "k")?.reason == .wrongKeyOrTampered)
                bytes[index] ^= 1 << bit
            }
        }
        // The header is authenticated too.
        #expect(failure(envelope.replacingOccurrences(of: ":raw:", with: ":raw :"), key: "k") != nil)
    }

    @Test func aTruncatedEnvelopeFails() throws {
        let envelope = try codec.encode("the value", key: "k")
        for cut in 1...8 {
            let reason = failure(String(envelope.dropLast(cut)), key: "k")?.reason
            #expect(reason == .wrongKeyOrTampered || reason == .malformed)
        }
        #expect(failure(String(envelope.prefix(30)), key: "k")?.reason == .malformed)
        #expect(failure("cs1:k2026", key: "k")?.reason == .malformed)
    }

    @Test func aCiphertextCopiedToAnotherKeyFails() throws {
        let theirs = try codec.encode("account A's token", key: "token.a")
        #expect(failure(theirs, key: "token.b")?.reason == .wrongKeyOrTampered)
    }

    @Test func anUnknownKeyIDIsNamed() throws {
        let old = try EnvelopeCodec(keys: [rawKey("k2019")])
        let failure = failure(try old.encode("v", key: "k"), key: "k")
        #expect(failure?.reason == .unknownKeyID)
        #expect(failure?.description == "the value was encrypted with key id \"k2019\", which is not in the key ring")
    }

    @Test func plaintextIsRefusedUnlessAllowed() throws {
        #expect(failure("{\"theme\":\"dark\"}")?.reason == .notAnEnvelope)
        let lenient = try EnvelopeCodec(keys: [rawKey("k")], allowPlaintext: true)
        #expect(try lenient.decode("{\"theme\":\"dark\"}", key: "k") == "{\"theme\":\"dark\"}")
        #expect(try lenient.encode("x", key: "k").hasPrefix("cs1:k:raw:"))  // writes are always encrypted
    }

    @Test func aKeyRingDecodesOlderKeysAndEncodesWithTheFirst() throws {
        let old = try rawKey("k2025")
        let new = try rawKey("k2026")
        let before = try EnvelopeCodec(keys: [old])
        let after = try EnvelopeCodec(keys: [new, old])
        let legacy = try before.encode("v", key: "k")
        #expect(try after.decode(legacy, key: "k") == "v")
        #expect(!after.isCurrent(legacy))
        let fresh = try after.encode("v", key: "k")
        #expect(fresh.hasPrefix("cs1:k2026:"))
        #expect(after.isCurrent(fresh))
    }

    @Test func passphraseKeysRecordTheirParametersSoAnotherRunDerivesTheSameKey() throws {
        let passphrase = "correct horse battery staple"
        let writer = try EnvelopeCodec(keys: [.passphrase(id: "pp", SecretBytes(utf8: passphrase), limits: quickLimits)]
        )
        let envelope = try writer.encode("secret", key: "k")
        #expect(envelope.hasPrefix("cs1:pp:argon2id13.1.65536."))
        // A later run has a different default salt, but reads the one recorded in the envelope.
        let reader = try EnvelopeCodec(keys: [.passphrase(id: "pp", SecretBytes(utf8: passphrase), limits: quickLimits)]
        )
        #expect(try reader.decode(envelope, key: "k") == "secret")
        let wrong = try EnvelopeCodec(keys: [
            .passphrase(id: "pp", SecretBytes(utf8: "Correct horse battery staple"), limits: quickLimits)
        ])
        #expect(failure(envelope, key: "k", codec: wrong)?.reason == .wrongKeyOrTampered)
    }

    @Test func badKeyConfigurationsAreRefused() throws {
        #expect(throws: CloudSyncError.self) { try EnvelopeCodec(keys: []) }
        #expect(throws: CloudSyncError.self) { try EnvelopeCodec.Key.raw(id: "bad id", SecretBytes.random(count: 32)) }
        #expect(throws: CloudSyncError.self) { try EnvelopeCodec.Key.raw(id: "short", SecretBytes.random(count: 16)) }
        #expect(throws: CloudSyncError.self) { try EnvelopeCodec(keys: [rawKey("a"), rawKey("a")]) }
    }

    @Test func keySourcesAndKeygen() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("vault.key")
        try generateKeyFile(at: path)
        let fromFile = try EnvelopeCodec(keys: [.keyFile(id: "file", path: path)])
        let envelope = try fromFile.encode("v", key: "k")
        let encoded = try String(contentsOfFile: path, encoding: .utf8)
        // The key from an environment variable, in a child (this test binary, running only the probe below): a
        // setenv here raced with other tests starting processes, whose Process.run copies the environment, and
        // crashed the whole run in memcpy (issue 28, one full run in eight).
        var environment = ProcessInfo.processInfo.environment
        environment[Self.keyVariable] = encoded
        environment[Self.envelopeVariable] = envelope
        environment["NO_COLOR"] = "1"
        let child = try await ProcessRunner.run(
            CommandLine.arguments[0],
            ["--testing-library", "swift-testing", "--filter", "decodesWithTheKeyInItsEnvironment"],
            environment: environment)
        #expect(child.status == 0, "\(child.standardError)")
        #expect(child.standardError.contains("Test decodesWithTheKeyInItsEnvironment() passed"), "the probe ran")
        let error = #expect(throws: CloudSyncError.self) { try generateKeyFile(at: path) }
        #expect(error?.message.contains("already exists") == true)
        let missing = #expect(throws: CloudSyncError.self) {
            try EnvelopeCodec.Key.environment(id: "x", variable: "CLOUDSYNC_TEST_UNSET_VARIABLE")
        }
        #expect(
            missing?.message
                == "environment variable CLOUDSYNC_TEST_UNSET_VARIABLE is not set; it should hold a base64 key")
    }

    static let keyVariable = "CLOUDSYNC_TEST_KEY"
    static let envelopeVariable = "CLOUDSYNC_TEST_ENVELOPE"

    /// Runs only in the child ``keySourcesAndKeygen()`` starts, whose environment holds a key and an envelope.
    @Test func decodesWithTheKeyInItsEnvironment() throws {
        guard let envelope = ProcessInfo.processInfo.environment[Self.envelopeVariable] else { return }
        let fromEnvironment = try EnvelopeCodec(keys: [.environment(id: "file", variable: Self.keyVariable)])
        #expect(try fromEnvironment.decode(envelope, key: "k") == "v")
    }
}

@Suite struct EncryptedStoreTests {
    @Test func theStoreEncryptsRoutesByEnvelopeSizeAndDecodes() async throws {
        let drive = FaultInjectingProvider(id: "drive")
        var options = StoreOptions()
        options.codec = try EnvelopeCodec(keys: [rawKey("k")])
        let store = try CloudStore(providers: [drive], options: options)
        try await store.set("dark", forKey: "theme")
        let stored = try #require(try await drive.get(["theme"])[0].get())
        #expect(stored.hasPrefix("cs1:k:raw:"))
        #expect(try await store.get("theme") == "dark")
    }

    @Test func rotationThenRekey() async throws {
        let drive = FaultInjectingProvider(id: "drive")
        let old = try rawKey("k2025")
        let new = try rawKey("k2026")
        var before = StoreOptions()
        before.codec = try EnvelopeCodec(keys: [old])
        let oldStore = try CloudStore(providers: [drive], options: before)
        for key in ["a", "b", "c"] { try await oldStore.set("value of \(key)", forKey: key) }
        _ = try await drive.set([KeyValue("empty", "")])

        var after = StoreOptions()
        after.codec = try EnvelopeCodec(keys: [new, old])
        let store = try CloudStore(providers: [drive], options: after)
        try await store.set("value of d", forKey: "d")  // already under the new key
        let result = try await store.maintenance.rekey(provider: "drive")
        #expect(result.copied.sorted() == ["a", "b", "c"])
        #expect(result.skipped.sorted() == ["d"])
        // A stored empty value is no envelope: it cannot be decoded, as `verify` says, so it is not passed over.
        #expect(result.failed.map(\.key) == ["empty"])
        #expect(result.failed.first?.error.code == .decode)
        for key in ["a", "b", "c", "d"] {
            #expect(try await drive.get([key])[0].get()?.hasPrefix("cs1:k2026:") == true)
        }
        // The old key can now leave the ring.
        var newOnly = StoreOptions()
        newOnly.codec = try EnvelopeCodec(keys: [new])
        #expect(try await CloudStore(providers: [drive], options: newOnly).get("a") == "value of a")
    }

    @Test func rekeyWithPlaintextAllowedEncryptsAnExistingStore() async throws {
        let drive = FaultInjectingProvider(id: "drive")
        _ = try await drive.set([KeyValue("a", "plain a"), KeyValue("b", "plain b")])
        var options = StoreOptions()
        options.codec = try EnvelopeCodec(keys: [rawKey("k")], allowPlaintext: true)
        let store = try CloudStore(providers: [drive], options: options)
        #expect(try await store.maintenance.rekey(provider: "drive").copied == ["a", "b"])
        #expect(try await drive.get(["a"])[0].get()?.hasPrefix("cs1:k:raw:") == true)
        #expect(try await store.get("b") == "plain b")
    }

    @Test func verifyReportsTamperedValuesWithoutPrintingThem() async throws {
        let drive = FaultInjectingProvider(id: "drive")
        let key = try rawKey("k")
        var options = StoreOptions()
        options.codec = try EnvelopeCodec(keys: [key])
        let store = try CloudStore(providers: [drive], options: options)
        for index in 0..<10 { try await store.set("secret value \(index)", forKey: "key.\(index)") }
        let good = try #require(try await drive.get(["key.1"])[0].get())
        _ = try await drive.set([
            KeyValue("key.1", String(good.dropLast(3)) + "AAA"),  // tampered
            KeyValue("key.2", try #require(try await drive.get(["key.3"])[0].get())),  // moved between keys
            KeyValue("key.4", "secret plaintext"),  // not an envelope
            KeyValue("key.5", try EnvelopeCodec(keys: [rawKey("k")]).encode("v", key: "key.5")),  // other key, same id
        ])
        let result = try await store.maintenance.verify(provider: "drive")
        #expect(result.checked == 10)
        #expect(result.ok == 6)
        #expect(result.failed.map(\.key) == ["key.1", "key.2", "key.4", "key.5"])
        #expect(result.failed.allSatisfy { $0.error.code == .decode })
        let text = result.failed.map(\.error.description).joined(separator: "\n")
        #expect(!text.contains("secret"))
        #expect(result.failed[2].error.message.contains("not an encrypted envelope"))
        #expect(result.failed[0].error.message.contains("does not open the envelope"))
    }
}

@Suite(.timeLimit(.minutes(10))) struct PyNaClInteropTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build/pyenv/bin/python3").path
    static let script = root.appendingPathComponent("scripts/envelope_interop.py").path

    private func interop(_ arguments: [String], environment: [String: String] = [:]) async throws -> String {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("PyNaCl's virtual environment is missing: run `make test`, which creates it")
            return ""
        }
        let result = try await ProcessRunner.run(
            Self.python, [Self.script] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        #expect(result.status == 0, "\(result.standardError)")
        return result.standardOutput
    }

    @Test func pyNaClDecryptsWhatCloudSyncEncryptsWithAKeyFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("vault.key")
        try generateKeyFile(at: path)
        let codec = try EnvelopeCodec(keys: [.keyFile(id: "k2026", path: path)])
        let value = "{\"theme\":\"dark\",\"note\":\"héllo 🌍\"}"
        let envelope = try codec.encode(value, key: "settings.theme")
        #expect(try await interop(["decrypt", envelope, "settings.theme", "--key-file", path]) == value)
    }

    @Test func pyNaClDecryptsWhatCloudSyncEncryptsWithAPassphrase() async throws {
        let codec = try EnvelopeCodec(keys: [
            .passphrase(id: "pp", SecretBytes(utf8: "tr0ub4dor&3"), limits: quickLimits)
        ])
        let envelope = try codec.encode("backup of favourites", key: "favourites")
        let plaintext = try await interop(
            ["decrypt", envelope, "favourites", "--passphrase-env", "INTEROP_PASSPHRASE"],
            environment: ["INTEROP_PASSPHRASE": "tr0ub4dor&3"])
        #expect(plaintext == "backup of favourites")
    }

    @Test func cloudSyncDecodesWhatPyNaClBuildsWithAKeyFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("vault.key")
        try generateKeyFile(at: path)
        let envelope = try await interop(["encrypt", "made by PyNaCl ✓", "restored.key", "k1", "--key-file", path])
        let codec = try EnvelopeCodec(keys: [.keyFile(id: "k1", path: path)])
        #expect(try codec.decode(envelope, key: "restored.key") == "made by PyNaCl ✓")
        #expect(throws: EnvelopeCodec.DecodeFailure.self) { try codec.decode(envelope, key: "other.key") }
    }

    @Test func cloudSyncDecodesWhatPyNaClBuildsWithAPassphrase() async throws {
        let envelope = try await interop(
            [
                "encrypt", "passphrase-protected", "k", "pp", "--passphrase-env", "INTEROP_PASSPHRASE", "--ops", "2",
                "--mem", "65536",
            ],
            environment: ["INTEROP_PASSPHRASE": "open sesame"])
        #expect(envelope.hasPrefix("cs1:pp:argon2id13.2.65536."))
        let codec = try EnvelopeCodec(keys: [
            .passphrase(id: "pp", SecretBytes(utf8: "open sesame"), limits: quickLimits)
        ])
        #expect(try codec.decode(envelope, key: "k") == "passphrase-protected")
    }
}
