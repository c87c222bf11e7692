import CloudSync
import Testing

/// The defaults README documents, each defined once and used by the store, the outbox and pipeline files.
@Suite struct DefaultsTests {
    @Test func aStoreWithoutOptionsUsesTheDocumentedDefaults() {
        let options = StoreOptions()
        #expect(options.timeout == .seconds(15))
        #expect(options.timeout == StoreOptions.defaultTimeout)
        #expect(options.availabilityLifetime == .seconds(30))
        #expect(options.availabilityLifetime == StoreOptions.defaultAvailabilityLifetime)
    }

    @Test func autoTieringCapsKeyValueStoresAt64KBAndRecordsAt900KB() {
        #expect(Tiering.defaultKVMaxBytes == 65_536)
        #expect(Tiering.defaultRecordMaxBytes == 921_600)
        #expect(Tiering.auto.cap(tier: .keyValue, declared: nil, override: nil) == Tiering.defaultKVMaxBytes)
        #expect(Tiering.auto.cap(tier: .record, declared: nil, override: nil) == Tiering.defaultRecordMaxBytes)
        #expect(Tiering.auto.cap(tier: .file, declared: nil, override: nil) == nil)
    }

    @Test func anOutboxWithoutLimitsKeeps1000Entries12AttemptsFor7Days() throws {
        let limits = Outbox.Limits.default
        #expect(limits.maxEntries == 1000)
        #expect(limits.maxAttempts == 12)
        #expect(limits.maxAge == .seconds(604_800))
        #expect(try Outbox().limits == limits)
        #expect(
            Outbox.Limits(maxEntries: 5) == Outbox.Limits(maxEntries: 5, maxAttempts: 12, maxAge: .seconds(604_800)))
    }
}
