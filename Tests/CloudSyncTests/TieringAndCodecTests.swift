import CloudSync
import CloudSyncTesting
import Testing

@Suite struct TieringTests {
    @Test func a200KBValueSkipsTheKeyValueStore() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, drive]) { $0.writeMode = .mirror }
        let value = String(repeating: "x", count: 200 * 1024)
        let receipt = try await store.set(value, forKey: "big")
        #expect(receipt == WriteReceipt(stored: ["googleDrive"], skippedTooLarge: ["icloudKV"]))
        #expect(try await raw(icloud, "big") == nil)
        #expect(try await store.get("big") == value)
    }

    @Test func failoverRoutesPastACapToTheNextProviderLargeEnough() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let records = makeProvider("cloudKit", Kind.record)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, records, drive])
        #expect(try await store.set(String(repeating: "s", count: 1000), forKey: "small").stored == ["icloudKV"])
        let medium = try await store.set(String(repeating: "m", count: 100 * 1024), forKey: "medium")
        #expect(medium == WriteReceipt(stored: ["cloudKit"], skippedTooLarge: ["icloudKV"]))
        let large = try await store.set(String(repeating: "l", count: 1024 * 1024), forKey: "large")
        #expect(large == WriteReceipt(stored: ["googleDrive"], skippedTooLarge: ["icloudKV", "cloudKit"]))
    }

    @Test func thresholdsAreInclusiveAndMeasuredInUTF8Bytes() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, drive])
        // 65,536 bytes exactly fits 64 KB; "é" is two bytes, so 32,769 of them (65,538 bytes) does not.
        #expect(try await store.set(String(repeating: "a", count: 65_536), forKey: "edge").stored == ["icloudKV"])
        #expect(try await store.set(String(repeating: "é", count: 32_769), forKey: "wide").stored == ["googleDrive"])
    }

    @Test func a2MBValueFitsNowhereAndTheErrorNamesTheFix() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let records = makeProvider("cloudKit", Kind.record)
        let store = try makeStore([icloud, records])
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.set(String(repeating: "x", count: 2 * 1024 * 1024), forKey: "video")
        }
        #expect(error?.code == .payloadTooLarge)
        #expect(error?.key == "video")
        #expect(
            error?.message
                == "the value is 2097152 bytes encoded and fits no provider (icloudKV takes at most 65536 bytes, "
                + "cloudKit takes at most 921600 bytes); add a provider without a size cap (such as sqlite, "
                + "directory, googleDrive or s3) after these, or raise the tiering thresholds")
        #expect(try await raw(icloud, "video") == nil)
        #expect(try await raw(records, "video") == nil)
    }

    @Test func aLargeEnoughProviderThatIsUnavailableIsNamed() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        drive.isAvailableNow = false
        let store = try makeStore([icloud, drive])
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.set(String(repeating: "x", count: 100_000), forKey: "k")
        }
        #expect(error?.code == .noProvider)
        #expect(
            error?.message
                == "the value is 100000 bytes encoded; the providers large enough for it (googleDrive) are unavailable")
    }

    @Test func explicitThresholds() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let records = makeProvider("cloudKit", Kind.record)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, records, drive]) {
            $0.tiering = .thresholds(kvMaxBytes: 32 * 1024, recordMaxBytes: 40 * 1024)
        }
        #expect(try await store.set(String(repeating: "x", count: 33 * 1024), forKey: "a").stored == ["cloudKit"])
        #expect(try await store.set(String(repeating: "x", count: 41 * 1024), forKey: "b").stored == ["googleDrive"])
    }

    @Test func tieringOffAlwaysWritesToThePreferredProvider() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, drive]) {
            $0.tiering = .off
            $0.writeMode = .mirror
        }
        #expect(try await store.set(String(repeating: "x", count: 200 * 1024), forKey: "k").stored == ["icloudKV"])
    }

    @Test func tieringOffStillRefusesAValueAboveAProvidersOwnCap() async throws {
        let capped = makeProvider("capped", ProviderCapabilities(maxValueBytes: 10))
        let drive = makeProvider("googleDrive")
        let store = try makeStore([capped, drive]) { $0.tiering = .off }
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.set("eleven bytes", forKey: "k")
        }
        #expect(error?.code == .payloadTooLarge)
        #expect(error?.provider == "capped")
    }

    @Test func aPerProviderOverrideLowersTheCap() async throws {
        let scratch = makeProvider("scratch")
        let drive = makeProvider("googleDrive")
        let store = try makeStore([scratch, drive]) { $0.maxValueBytes = ["scratch": 100] }
        #expect(try await store.set(String(repeating: "x", count: 100), forKey: "a").stored == ["scratch"])
        let receipt = try await store.set(String(repeating: "x", count: 101), forKey: "b")
        #expect(receipt == WriteReceipt(stored: ["googleDrive"], skippedTooLarge: ["scratch"]))
    }

    @Test func sizeIsMeasuredAfterEncoding() async throws {
        let capped = makeProvider("capped", ProviderCapabilities(maxValueBytes: 20))
        let drive = makeProvider("googleDrive")
        let store = try makeStore([capped, drive]) { $0.codec = BracketCodec() }
        // "[enc:k:" + value + "]" is 8 bytes more than the value: 12 fits in 20, 13 does not.
        #expect(try await store.set(String(repeating: "v", count: 12), forKey: "k").stored == ["capped"])
        #expect(try await store.set(String(repeating: "v", count: 13), forKey: "k").stored == ["googleDrive"])
    }
}

@Suite struct CodecTests {
    @Test func valuesAreEncodedOnTheWayInAndDecodedOnTheWayOut() async throws {
        let drive = makeProvider("googleDrive")
        let store = try makeStore([drive]) { $0.codec = BracketCodec() }
        try await store.set("secret", forKey: "token")
        #expect(try await raw(drive, "token") == "[enc:token:secret]")
        #expect(try await store.get("token") == "secret")
        #expect(try await store.allKeys().keys == ["token"])
    }

    @Test func aProviderCodecOverridesTheStoreCodec() async throws {
        let local = makeProvider("local")
        let backup = makeProvider("backup")
        let store = try makeStore([local, backup]) {
            $0.writeMode = .mirror
            $0.codec = BracketCodec(tag: "store")
            $0.providerCodecs = ["backup": BracketCodec(tag: "vault")]
        }
        try await store.set("v", forKey: "k")
        #expect(try await raw(local, "k") == "[store:k:v]")
        #expect(try await raw(backup, "k") == "[vault:k:v]")
        local.isAvailableNow = false
        let fromBackup = try makeStore([local, backup]) {
            $0.codec = BracketCodec(tag: "store")
            $0.providerCodecs = ["backup": BracketCodec(tag: "vault")]
        }
        #expect(try await fromBackup.get("k") == "v")
    }

    @Test func aDecodeFailureNamesTheKeyAndProvider() async throws {
        let drive = makeProvider("googleDrive")
        _ = try await drive.set([KeyValue("k", "plaintext written elsewhere")])
        let store = try makeStore([drive]) { $0.codec = BracketCodec() }
        let error = await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(error?.code == .decode)
        #expect(error?.key == "k")
        #expect(error?.provider == "googleDrive")
        #expect(error?.message.contains("value is not bracketed") == true)
        #expect(error?.message.contains("plaintext written elsewhere") == false)
    }
}

@Suite struct KeyRuleTests {
    @Test func recordNameRulesApplyOnlyWhenARecordProviderIsConfigured() async throws {
        let kv = try makeStore([makeProvider("icloudKV", Kind.keyValue)])
        try await kv.set("dark", forKey: "settings/theme")

        let drive = makeProvider("googleDrive")
        let records = makeProvider("cloudKit", Kind.record)
        let store = try makeStore([drive, records])
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("dark", forKey: "settings/theme") }
        #expect(error?.code == .invalidKey)
        #expect(error?.provider == "cloudKit")
        #expect(
            error?.message
                == "a key may contain only ASCII letters, digits, and . _ - (a rule of provider cloudKit); rename the key, or pass it through sanitizeKey()"
        )
        #expect(drive.calls(.set) == 0)
        #expect(records.calls(.set) == 0)
    }

    @Test(arguments: [
        ("_private", "a key may not start with _"),
        (String(repeating: "k", count: 256), "a key may be at most 255 characters"),
    ])
    func cloudKitRules(key: String, rule: String) async throws {
        let store = try makeStore([makeProvider("cloudKit", Kind.record)])
        let error = await #expect(throws: CloudSyncError.self) { try await store.get(key) }
        #expect(error?.message.hasPrefix(rule) == true)
    }

    @Test func theKeyValueStoreLimitsKeysTo64Bytes() async throws {
        let store = try makeStore([makeProvider("icloudKV", Kind.keyValue)])
        try await store.set("v", forKey: String(repeating: "k", count: 64))
        let error = await #expect(throws: CloudSyncError.self) {
            try await store.set("v", forKey: String(repeating: "é", count: 33))
        }
        #expect(error?.message.hasPrefix("a key may be at most 64 bytes of UTF-8") == true)
    }

    @Test func validateKeysFalseSkipsProviderRulesButNotEmptiness() async throws {
        let records = makeProvider("cloudKit", Kind.record)
        let store = try makeStore([records]) { $0.validateKeys = false }
        try await store.set("v", forKey: "settings/theme")
        #expect(records.calls(.set) == 1)
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "") }
        #expect(error?.code == .invalidKey)
    }

    @Test func multiSetReportsAnInvalidKeyInItsSlot() async throws {
        let store = try makeStore([makeProvider("cloudKit", Kind.record)])
        let results = try await store.multiSet([KeyValue("good", "1"), KeyValue("bad key", "2")])
        #expect((try? results[0].get())?.stored == ["cloudKit"])
        #expect(throws: CloudSyncError.self) { try results[1].get() }
    }

    @Test func sanitizeKeyLeavesValidKeysAlone() {
        for key in ["theme", "settings.theme", "a-b_c.9", String(repeating: "k", count: 64)] {
            #expect(sanitizeKey(key) == key)
        }
    }

    @Test func sanitizeKeyRewritesAndHashes() {
        let sanitized = sanitizeKey("My Report (2024).pdf")
        #expect(sanitized.hasPrefix("My_Report__2024_.pdf-"))
        #expect(sanitized.utf8.count == "My_Report__2024_.pdf-".utf8.count + 16)
        #expect(sanitizeKey("a/b") != sanitizeKey("a b"))
        #expect(sanitizeKey("_hidden").hasPrefix("-hidden-"))
        #expect(sanitizeKey("") != "")
    }

    /// What docs/library.md now says: a rewritten key is valid, so it maps to itself, and the input that produced it
    /// and the rewritten key as an input share one key (the old sentence promised distinct inputs never collide).
    @Test func aRewrittenKeyGivenAsInputSharesTheKeyOfTheInputItCameFrom() {
        let rewritten = sanitizeKey("a b")
        #expect(rewritten != "a b" && sanitizeKey(rewritten) == rewritten)
    }

    @Test func longKeysSharingAPrefixStayDistinct() {
        let prefix = String(repeating: "p", count: 100)
        let first = sanitizeKey(prefix + "one")
        let second = sanitizeKey(prefix + "two")
        #expect(first != second)
        #expect(first.utf8.count == 64)
    }

    @Test func sanitizedKeysSatisfyEveryRuleAndAreStable() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("aZ09._-/ é日🌍\u{0}\n_")
        let rules: [KeyRule] = [.nonEmpty] + KeyRule.cloudKitRecordName + KeyRule.iCloudKeyValue
        for _ in 0..<500 {
            let length = Int.random(in: 0..<150, using: &generator)
            let key = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let sanitized = sanitizeKey(key)
            #expect(rules.allSatisfy { $0.allows(sanitized) }, "\(key.debugDescription) -> \(sanitized)")
            #expect(sanitizeKey(sanitized) == sanitized)
        }
    }
}

/// Every path that writes to a chosen provider refuses, per key, a value larger than that provider takes, with the
/// same error naming the size and the cap.
@Suite struct SizeCapTests {
    @Test func aDirectWriteRefusesAValueAboveTheProvidersCapAndStoresTheRest() async throws {
        let capped = makeProvider("capped", ProviderCapabilities(maxValueBytes: 10))
        let store = try makeStore([capped])
        let results = try await store.write(
            [KeyValue("small", "ten bytes!"), KeyValue("big", "eleven bytes")], to: "capped")
        #expect((try? results[0].get()) != nil)
        let error = results[1].failure
        #expect(error?.code == .payloadTooLarge)
        #expect(error?.key == "big")
        #expect(
            error?.message.hasPrefix("the value is 12 bytes encoded, more than the 10 bytes provider capped takes")
                == true)
        #expect(try await raw(capped, "small") == "ten bytes!")
        #expect(try await raw(capped, "big") == nil)
    }

    @Test func migrateFailsOnlyTheKeysTheDestinationCannotTake() async throws {
        let source = makeProvider("source")
        let destination = makeProvider("small", ProviderCapabilities(maxValueBytes: 20))
        _ = try await source.set([KeyValue("a", "short"), KeyValue("b", String(repeating: "x", count: 14))])
        // The destination's codec adds 8 bytes to "a"'s 5 and "b"'s 14: 13 fits in 20, 22 does not.
        let store = try makeStore([source, destination]) { $0.providerCodecs = ["small": BracketCodec()] }
        let result = try await store.maintenance.migrate(from: "source", to: "small")
        #expect(result.copied == ["a"])
        #expect(result.failed.map(\.key) == ["b"])
        #expect(result.failed.first?.error.code == .payloadTooLarge)
        #expect(result.failed.first?.error.message.contains("22 bytes encoded, more than the 20 bytes") == true)
        #expect(try await raw(destination, "b") == nil)
    }

    @Test func rekeyLeavesAValueThatWouldGrowPastTheCapAsItWas() async throws {
        // The cap is the store's own (the provider would take anything), so only the store can refuse.
        let capped = makeProvider("capped")
        _ = try await capped.set([
            KeyValue("a", "[o:a:v]"), KeyValue("b", "[o:b:\(String(repeating: "x", count: 10))]"),
        ])
        let store = try makeStore([capped]) {
            $0.codec = RotatingCodec()
            $0.maxValueBytes = ["capped": 20]
        }
        let result = try await store.maintenance.rekey(provider: "capped")
        // "[enc:a:v]" is 9 bytes; "[enc:b:xxxxxxxxxx]" is 18, still fits; both are rewritten.
        #expect(result.copied == ["a", "b"])
        _ = try await capped.set([KeyValue("c", "[o:c:\(String(repeating: "y", count: 13))]")])
        // "[o:c:" + 13 + "]" is 19 bytes, but "[enc:c:" + 13 + "]" is 21, one more than the cap: refused, and the old
        // copy stays as it was.
        let second = try await store.maintenance.rekey(provider: "capped")
        #expect(second.failed.map(\.key) == ["c"])
        #expect(second.failed.first?.error.code == .payloadTooLarge)
        #expect(try await raw(capped, "c") == "[o:c:\(String(repeating: "y", count: 13))]")
    }
}

/// Decodes values bracketed with the `o` or the `enc` tag, encodes with `enc`: a key rotation in miniature.
private struct RotatingCodec: ValueCodec {
    func encode(_ value: String, key: String) throws -> String { try BracketCodec().encode(value, key: key) }
    func decode(_ stored: String, key: String) throws -> String {
        if let old = try? BracketCodec(tag: "o").decode(stored, key: key) { return old }
        return try BracketCodec().decode(stored, key: key)
    }
    func isCurrent(_ stored: String) -> Bool { stored.hasPrefix("[enc:") }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
