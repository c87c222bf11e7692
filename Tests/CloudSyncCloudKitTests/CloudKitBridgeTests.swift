import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// The bridge against the CloudKit emulator over loopback.
@Suite struct CloudKitBridgeTests {
    @Test func ensureZoneIsIdempotentAndTypedFieldsRoundTrip() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        #expect(try await bridge.zoneExists() == false)
        try await bridge.ensureZone()
        try await bridge.ensureZone()
        #expect(try await bridge.zoneExists())
        let fields: [String: CloudKitValue] = [
            "text": .string("héllo +/= ✓"), "count": .int64(9_007_199_254_740_993), "ratio": .double(0.25),
            "when": .timestamp(1_764_547_200_123), "blob": .bytes(Data([0, 1, 254, 255])),
            "tags": .stringList(["a", "b"]), "numbers": .int64List([1, -2]), "ratios": .doubleList([1.5, -0.5]),
            "times": .timestampList([1, 2]), "blobs": .bytesList([Data([1]), Data()]),
        ]
        let saved = try await bridge.saveRecords([
            CloudKitRecord(recordName: "typed", recordType: "Typed", fields: fields)
        ])
        #expect(saved.errors.isEmpty && saved.conflicts.isEmpty)
        #expect(saved.saved.first?.recordChangeTag != nil)
        let read = try await bridge.lookup(["typed", "missing"])
        let record = try #require(try read[0].get())
        #expect(record.fields == fields)
        #expect(record.recordType == "Typed")
        #expect(try read[1].get() == nil)
    }

    @Test(arguments: ["EXISTS", "CONFLICT"])
    func aCreateOfAnExistingRecordReturnsTheServersRecord(existingCode: String) async throws {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure { $0.existingRecordCode = existingCode }
        let first = try fixture.bridge()
        let second = try fixture.bridge()
        try await first.ensureZone()
        let won = try await first.saveRecords([item("entry.1", "first device"), item("entry.2", "only first")])
        #expect(won.saved.map(\.recordName) == ["entry.1", "entry.2"])
        let result = try await second.saveRecords([item("entry.1", "second device"), item("entry.3", "new")])
        #expect(result.saved.map(\.recordName) == ["entry.3"])
        #expect(result.conflicts.map(\.recordName) == ["entry.1"])
        #expect(result.conflicts.first?.fields["value"] == .string("first device"))
        #expect(result.conflicts.first?.recordChangeTag == won.saved.first?.recordChangeTag)
        #expect(result.errors.isEmpty)
    }

    @Test func saveRecordsChunksTo200AndAStaleChangeTagIsAConflict() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let records = (0..<450).map { item("bulk.\($0)", "v\($0)") }
        fixture.host.server.clearLog()
        let result = try await bridge.saveRecords(records)
        #expect(result.saved.count == 450)
        #expect(fixture.count("records/modify") == 3)
        #expect(fixture.count("records/lookup") == 0)

        var stale = try #require(result.saved.first)
        _ = try await bridge.modify([CloudKitOperation(.forceReplace, item("bulk.0", "changed"))])
        stale.fields["value"] = .string("from a stale copy")
        let outcome = try await bridge.modify([CloudKitOperation(.update, stale)])
        #expect(throws: CloudKitError.self) { try outcome[0].get() }
        if case .failure(let error) = outcome[0] {
            #expect(error.code == .conflict)
            #expect(error.serverErrorCode == "CONFLICT")
            #expect(error.recordName == "bulk.0")
        }
    }

    @Test func fetchChangesFollowsMoreComingAndReportsTombstones() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge(changesPageSize: 7)
        try await bridge.ensureZone()
        _ = try await bridge.saveRecords((0..<20).map { item("change.\($0)", "v\($0)") })
        fixture.host.server.clearLog()
        let all = try await bridge.fetchChanges(since: nil)
        #expect(all.records.count == 20)
        #expect(all.deletedRecordNames.isEmpty)
        #expect(fixture.count("changes/zone") == 3)
        let token = try #require(all.syncToken)

        _ = try await bridge.deleteRecords(["change.1", "change.2", "change.3", "never.existed"])
        _ = try await bridge.modify([
            CloudKitOperation(.forceReplace, item("change.4", "four")),
            CloudKitOperation(.forceReplace, item("change.5", "five")),
        ])
        let delta = try await bridge.fetchChanges(since: token)
        #expect(delta.records.map(\.recordName) == ["change.4", "change.5"])
        #expect(delta.records.first?.fields["value"] == .string("four"))
        #expect(delta.deletedRecordNames == ["change.1", "change.2", "change.3"])
        #expect(delta.syncToken != token)

        let nothing = try await bridge.fetchChanges(since: delta.syncToken)
        #expect(nothing.records.isEmpty && nothing.deletedRecordNames.isEmpty)
        #expect(nothing.syncToken == delta.syncToken)
    }

    @Test func anExpiredTokenIsTokenExpiredAndAFetchFromNilRecovers() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        _ = try await bridge.saveRecords([item("a", "1")])
        let token = try #require(try await bridge.fetchChanges(since: nil).syncToken)
        fixture.emulator.database.expireChangeTokens(
            container: CloudKitFixture.container, environment: "development", zone: "CloudSyncZone")
        let error = await #expect(throws: CloudKitError.self) { try await bridge.fetchChanges(since: token) }
        #expect(error?.code == .tokenExpired)
        #expect(try await bridge.fetchChanges(since: nil).records.map(\.recordName) == ["a"])

        // A deleted and re-created zone refuses the old zone's tokens too.
        let fresh = try #require(try await bridge.fetchChanges(since: nil).syncToken)
        try await bridge.deleteZone()
        let missing = await #expect(throws: CloudKitError.self) { try await bridge.fetchChanges(since: fresh) }
        #expect(missing?.code == .zoneNotFound)
        try await bridge.ensureZone()
        let gone = await #expect(throws: CloudKitError.self) { try await bridge.fetchChanges(since: fresh) }
        #expect(gone?.code == .tokenExpired)
        // Each error says what to do about its own code: the advice travels beside the message, never inside it.
        #expect(missing?.advice == "; create the zone (ensureZone, `cloudsync cloudkit ensure-zone`)")
        #expect(gone?.advice == "; fetch the changes again from the start (no token)")
        #expect(gone?.text.contains("ensure-zone") == false)
    }

    @Test func eachAnswersTokenIsKeptBeforeTheNextRequestEvenWhenTokensAreSingleUse() async throws {
        let fixture = try CloudKitFixture { $0.singleUseTokens = true }
        let store = InMemoryProviderStateStore()
        let state = ProviderState(provider: "ck", store: store)
        let bridge = try fixture.bridge(state: state)
        try await bridge.ensureZone()
        _ = try await bridge.saveRecords([item("rotated", "1")])
        _ = try await bridge.lookup(["rotated"])
        let kept = try #require(try state.credential(.cloudKitWebAuthToken))
        #expect(kept != fixture.signedInToken)
        #expect(kept == bridge.webAuthToken.value)
        #expect(kept.contains("+") || kept.contains("/") || kept.contains("="))
        // A second bridge over the same state (the next run) starts from the kept token and is signed in.
        let nextRun = try fixture.bridge(state: state)
        #expect(try await nextRun.userRecordID() == fixture.userRecordName)
        // The token the sign-in delivered is spent.
        let stale = try fixture.bridge(token: .some(fixture.signedInToken))
        #expect(await stale.accountStatus() == .noAccount)
    }

    @Test func accountStatusAndIdentityComeFromTheServersAnswer() async throws {
        let fixture = try CloudKitFixture()
        #expect(await (try fixture.bridge()).accountStatus() == .available)
        #expect(try await (try fixture.bridge()).userRecordID() == fixture.userRecordName)
        fixture.host.server.clearLog()
        let nobody = try fixture.bridge(token: .some(nil))
        #expect(await nobody.accountStatus() == .noAccount)
        #expect(fixture.host.server.requestLog.isEmpty)
        let refused = try fixture.bridge(token: .some("CK/1+not-a-token="))
        let error = await #expect(throws: CloudKitError.self) { try await refused.userRecordID() }
        #expect(error?.code == .notAuthenticated)
        #expect(error?.serverErrorCode == "AUTHENTICATION_REQUIRED")
        #expect(error?.redirectURL?.contains(CloudKitWebAuthEmulator.signInPath) == true)
        #expect(error.map { !$0.description.contains("not-a-token") } == true)
        #expect(await refused.accountStatus() == .noAccount)
    }

    @Test func serverErrorsMapToTheBridgesCodes() async throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        let noZone = await #expect(throws: CloudKitError.self) { try await bridge.lookup(["a"]) }
        #expect(noZone?.code == .zoneNotFound)
        try await bridge.ensureZone()
        let database = fixture.emulator.database
        let cases: [(Int, String, Int?, CloudKitErrorCode)] = [
            (429, "THROTTLED", 3, .retryLater), (503, "TRY_AGAIN_LATER", 2, .retryLater),
            (413, "QUOTA_EXCEEDED", nil, .quotaExceeded), (400, "BAD_REQUEST", nil, .badInput),
            (421, "AUTHENTICATION_REQUIRED", nil, .notAuthenticated), (500, "INTERNAL_ERROR", nil, .error),
            (403, "ACCESS_DENIED", nil, .error),
        ]
        for (status, code, retryAfter, expected) in cases {
            database.failNext(operation: "records/modify", status: status, code: code, retryAfter: retryAfter)
            let error = await #expect(throws: CloudKitError.self) { try await bridge.saveRecords([item("x", "1")]) }
            #expect(error?.code == expected, "\(code)")
            #expect(error?.retryAfterMs == retryAfter.map { $0 * 1000 }, "\(code)")
            #expect(error.map { !$0.description.contains(CloudKitFixture.apiToken) } == true)
        }
        // A per-record failure lands in errors without failing the batch.
        database.failRecord("full", code: "QUOTA_EXCEEDED")
        let partial = try await bridge.saveRecords([item("full", "1"), item("fine", "2")])
        #expect(partial.saved.map(\.recordName) == ["fine"])
        #expect(partial.errors.map(\.code) == [.quotaExceeded])
        #expect(partial.errors.first?.recordName == "full")

        fixture.host.server.stop()
        let offline = await #expect(throws: CloudKitError.self) { try await bridge.lookup(["a"]) }
        #expect(offline?.code == .network)
    }

    @Test func productionRefusesARecordTypeNobodyDeployed() async throws {
        let fixture = try CloudKitFixture(environment: "production")
        let bridge = try fixture.bridge()
        try await bridge.ensureZone()
        let refused = try await bridge.saveRecords([item("p", "1")])
        #expect(refused.saved.isEmpty)
        #expect(refused.errors.first?.code == .badInput)
        #expect(refused.errors.first?.message.contains("production schema") == true)

        let development = try CloudKitFixture.developmentTwin(of: fixture)
        try await development.ensureZone()
        _ = try await development.saveRecords([item("d", "1")])
        fixture.emulator.database.deploySchema(container: CloudKitFixture.container)
        #expect(try await bridge.saveRecords([item("p", "1")]).saved.count == 1)
    }

    @Test func theKeyValueStoreSaysItIsUnavailable() throws {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge()
        #expect(CloudKitBridge.isKeyValueStoreAvailable == false)
        let error = #expect(throws: CloudKitError.self) { try bridge.kvSetItem("theme", "\"dark\"") }
        #expect(error?.message.contains("unavailable here") == true)
        #expect(throws: CloudKitError.self) { _ = try bridge.kvGetAllItems() }
    }
}

extension CloudKitFixture {
    /// A bridge to the development environment of `fixture`'s emulator, signed in as the same person.
    static func developmentTwin(of fixture: CloudKitFixture) throws -> CloudKitBridge {
        let token = fixture.emulator.webAuth.issueToken(container: container, environment: "development")
        var configuration = fixture.configuration()
        configuration.environment = "development"
        return CloudKitBridge(
            configuration: configuration,
            webAuthToken: try CloudKitWebAuthToken(
                state: ProviderState(provider: "dev", store: InMemoryProviderStateStore()), fallback: token),
            retryPolicy: RetryPolicy(maxAttempts: 1))
    }
}
