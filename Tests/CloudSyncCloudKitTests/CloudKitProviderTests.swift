import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

extension CloudKitFixture {
    /// A `cloudKit` provider on `zone`, made by the factory from pipeline-like field values.
    func provider(
        zone: String = "CloudSyncZone", id: String = "ck", state: ProviderState? = nil, webAuthToken: String?? = .none,
        readOnly: Bool = false, recordMaxBytes: Int64? = nil
    ) throws -> CloudKitProvider {
        var values: [String: ProviderFieldValue] = [
            "container": .text(Self.container), "environment": .text(environment), "apiToken": .text(Self.apiToken),
            "endpoint": .text(endpoint.absoluteString), "zone": .text(zone),
            // Generous, as the bridge's: the loaded suite can hold an answer back longer than the default 30 s.
            "timeoutMs": .integer(120_000),
        ]
        let token: String? =
            switch webAuthToken {
            // A sign-in of its own: a session keeps only its 16 newest tokens valid.
            case .none: emulator.webAuth.issueToken(container: Self.container, environment: environment)
            case .some(let given): given
            }
        if let token { values["webAuthToken"] = .text(token) }
        if let recordMaxBytes { values["recordMaxBytes"] = .integer(recordMaxBytes) }
        let factory = CloudKitProviderFactory()
        let configuration = try factory.configuration(from: ProviderFieldValues(values))
        let context = ProviderContext(
            providerID: id, state: state ?? ProviderState(provider: id, store: InMemoryProviderStateStore()),
            readOnly: readOnly)
        return try #require(try factory.make(configuration, context: context) as? CloudKitProvider)
    }
}

/// The `cloudKit` provider against the CloudKit emulator over loopback.
@Suite struct CloudKitProviderTests {
    @Test func aBackupRepositoryLivesItsWholeLifeInAZone() async throws {
        let fixture = try CloudKitFixture()
        let failures = await BackupRoundTrip.run(on: try fixture.provider(zone: "Backups"))
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func conformsToTheProviderContract() async throws {
        let fixture = try CloudKitFixture()
        let counter = Counter()
        let failures = await ProviderConformanceSuite.run {
            try fixture.provider(zone: "Conformance\(counter.next())")
        }
        #expect(failures.isEmpty, "\(failures)")
        let provider = try fixture.provider()
        await provider.close()
        let errors = await ProviderConformanceSuite.errorsAfterClose(provider)
        #expect(errors.allSatisfy { $0?.code == .closed && $0?.provider == "ck" }, "\(errors)")
    }

    @Test func fiveHundredKeysAreThreeModifiesAndThreeLookups() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        // The first write finds no zone, creates it and is sent once more.
        #expect(try await provider.set([KeyValue("first", "1")]).allSatisfy { (try? $0.get()) != nil })
        #expect(fixture.count("records/modify") == 2)
        #expect(fixture.count("zones/modify") == 1)

        let items = (0..<500).map { KeyValue("key.\($0)", "value \($0)") }
        fixture.host.server.clearLog()
        let written = try await provider.set(items)
        #expect(written.allSatisfy { (try? $0.get()) != nil })
        #expect(fixture.count("records/modify") == 3)
        #expect(fixture.host.server.requestLog.count == 3)

        fixture.host.server.clearLog()
        let read = try await provider.get(items.map(\.key) + ["absent"])
        #expect(read.map { try? $0.get() } == items.map { $0.value } + [nil])
        #expect(fixture.count("records/lookup") == 3)
        #expect(fixture.host.server.requestLog.count == 3)

        fixture.host.server.clearLog()
        #expect(try await provider.remove(items.map(\.key) + ["absent"]).allSatisfy { (try? $0.get()) != nil })
        #expect(fixture.count("records/modify") == 3)
        #expect(
            fixture.emulator.database.recordNames(
                container: CloudKitFixture.container, environment: "development", zone: "CloudSyncZone") == ["first"])
    }

    @Test func listingWalksTheChangeFeedAndSkipsTombstones() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        #expect(try await provider.listKeys(after: nil, limit: 10) == KeyPage(keys: [], nextCursor: nil))
        _ = try await provider.set((0..<12).map { KeyValue("list.\($0)", "v") })
        _ = try await provider.remove(["list.3", "list.4"])
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 5)
            seen += page.keys
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil
        #expect(seen.sorted() == (0..<12).filter { $0 != 3 && $0 != 4 }.map { "list.\($0)" }.sorted())
        #expect(pages == 3)
    }

    @Test func theChangeFeedNamesSetAndDeletedRecordsAndAnExpiredTokenSaysSo() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        #expect(try await provider.changeFeedCursor() == nil, "no zone yet, no feed position")
        _ = try await provider.set([KeyValue("before", "0")])
        let start = try #require(try await provider.changeFeedCursor())
        _ = try await provider.set([KeyValue("a", "1"), KeyValue("b", "2"), KeyValue("c", "3")])
        _ = try await provider.remove(["b", "before"])
        var changes: [String: Bool] = [:]
        var cursor = start
        while true {
            guard case .changes(let page) = try await provider.changes(since: cursor, limit: 2) else {
                Issue.record("a fresh token was refused")
                return
            }
            for change in page.changes { changes[change.key] = change.removed }
            cursor = page.cursor
            if !page.hasMore { break }
        }
        #expect(changes == ["a": false, "b": true, "c": false, "before": true])
        fixture.emulator.database.expireChangeTokens(
            container: CloudKitFixture.container, environment: fixture.environment, zone: "CloudSyncZone")
        guard case .expired = try await provider.changes(since: cursor, limit: 2) else {
            Issue.record("an expired token was served")
            return
        }
    }

    @Test func identityIsTheUserRecordNameAndQuotaIsNothing() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        #expect(await provider.availability() == .available)
        #expect(try await provider.accountIdentity() == fixture.userRecordName)
        #expect(try await provider.quota() == nil)
        #expect(provider.capabilities.maxValueBytes == 921_600)
        #expect(provider.capabilities.tier == .record)
        #expect(provider.capabilities.batchLimit == 200)
        #expect(provider.subscribeToRemoteChanges { _ in } == nil)
    }

    /// Another user behind the sign-in, or nobody, is an account event.
    ///
    /// The seed: "cloudKit reports account changes". It reported none, so a long-lived store over CloudKit never
    /// abandoned its outbox when the iCloud account changed.
    @Test func anotherUserBehindTheSignInIsAnAccountChange() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        #expect(provider.capabilities.emitsAccountEvents)
        let events = Mutex<[AccountEvent]>([])
        let subscription = provider.subscribeToAccountChanges { event in events.withLock { $0.append(event) } }
        #expect(await provider.availability() == .available)
        #expect(await provider.availability() == .available)
        #expect(events.withLock { $0 }.isEmpty)
        fixture.emulator.webAuth.switchAccount(of: "user@example.com", to: "someone.else@example.com")
        #expect(await provider.availability() == .available)
        let other = CloudKitWebAuthEmulator.userRecordName("someone.else@example.com", CloudKitFixture.container)
        #expect(try await provider.accountIdentity() == other)
        #expect(events.withLock { $0.map(\.identityChanged) } == [true])
        #expect(events.withLock { $0.first?.status } == .available)
        // Signed out: reported once, however often it is asked.
        fixture.emulator.webAuth.signOut(appleID: "someone.else@example.com")
        #expect(await provider.availability().reason == .signedOut)
        #expect(await provider.availability().reason == .signedOut)
        #expect(events.withLock { $0.map(\.status) } == [.available, .noAccount])
        subscription?.cancel()
    }

    /// A store over CloudKit abandons what it queued for the previous user once a probe sees another one.
    @Test func aStoreAbandonsItsOutboxWhenTheICloudAccountChanges() async throws {
        let fixture = try CloudKitFixture()
        let cloudKit = FaultInjectingProvider(try fixture.provider())
        let clock = ManualClock()
        var options = StoreOptions()
        options.clock = clock
        options.timeout = nil
        let drops = Mutex<[Outbox.DropReason]>([])
        options.outbox = try Outbox(
            storage: InMemoryOutboxStorage(), onDropped: { _, reason in drops.withLock { $0.append(reason) } })
        let store = try CloudStore(providers: [cloudKit], options: options)
        cloudKit.fail(.set, with: CloudSyncError(.offline, "the network is down"))
        let receipt = try await store.set("the first user's", forKey: "note")
        #expect(receipt.queued == ["ck"])
        fixture.emulator.webAuth.switchAccount(of: "user@example.com", to: "someone.else@example.com")
        clock.advance(by: .seconds(60))
        _ = try await store.availability(of: "ck")
        try await waitUntil { store.pendingWrites().isEmpty }
        #expect(drops.withLock { $0 } == [.accountChanged])
        store.close()
    }

    /// Under each way the emulator can say a zone is missing (for the request, or in every record's slot of a 200),
    /// a write creates the zone and is sent again, and a dry run's read finds nothing.
    @Test(arguments: CloudKitDatabaseEmulator.MissingZoneAnswer.allCases)
    func aMissingZoneIsCreatedHoweverItIsReported(answer: CloudKitDatabaseEmulator.MissingZoneAnswer) async throws {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure { $0.missingZone = answer }
        let dryRun = try fixture.provider(zone: "Fresh", readOnly: true)
        #expect(try await dryRun.get(["a", "b"]).map { try $0.get() } == [nil, nil])
        let provider = try fixture.provider(zone: "Fresh")
        let written = try await provider.set([KeyValue("a", "1"), KeyValue("b", "2")])
        #expect(written.allSatisfy { (try? $0.get()) != nil }, "\(written)")
        #expect(try await provider.get(["a", "b"]).map { try $0.get() } == ["1", "2"])
    }

    /// Each wording the emulator can refuse an expired sync token with is recognised, by its code and reason
    /// together, as an expired cursor: the change feed falls back to a full comparison instead of failing.
    @Test(arguments: CloudKitDatabaseEmulator.ExpiredTokenAnswer.allCases)
    func anExpiredSyncTokenIsRecognisedInEveryWording(answer: CloudKitDatabaseEmulator.ExpiredTokenAnswer)
        async throws
    {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure { $0.expiredToken = answer }
        let provider = try fixture.provider()
        _ = try await provider.set([KeyValue("a", "1")])
        let cursor = try #require(try await provider.changeFeedCursor())
        fixture.emulator.database.expireChangeTokens(
            container: CloudKitFixture.container, environment: fixture.environment, zone: "CloudSyncZone")
        guard case .expired = try await provider.changes(since: cursor, limit: 10) else {
            Issue.record("an expired token (\(answer)) was not recognised")
            return
        }
        let error = await #expect(throws: CloudKitError.self) {
            try await provider.bridge.fetchChangesPage(since: cursor, limit: 10)
        }
        #expect(error?.code == .tokenExpired)
    }

    @Test func withoutASignInTheProviderIsSignedOutNamingLogin() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider(webAuthToken: .some(nil))
        let availability = await provider.availability()
        #expect(availability.reason == .signedOut)
        // Made by hand, outside a pipeline: the file is the placeholder FILE.
        #expect(availability.description.contains("cloudsync login FILE --provider ck"))
        let error = await #expect(throws: CloudSyncError.self) { try await provider.get(["a"]) }
        #expect(error?.code == .notSignedIn)
    }

    @Test(
        arguments: [
            (429, "THROTTLED", 2, "ERR_RATE_LIMITED"), (503, "TRY_AGAIN_LATER", 1, "ERR_RATE_LIMITED"),
            (413, "QUOTA_EXCEEDED", nil, "ERR_QUOTA_EXCEEDED"),
            (421, "AUTHENTICATION_REQUIRED", nil, "ERR_NOT_SIGNED_IN"),
            (401, "AUTHENTICATION_FAILED", nil, "ERR_CONTAINER_MISCONFIGURED"),
            (403, "ACCESS_DENIED", nil, "ERR_CONTAINER_MISCONFIGURED"), (500, "INTERNAL_ERROR", nil, "ERR_PROVIDER"),
            (400, "BAD_REQUEST", nil, "ERR_PROVIDER"),
        ] as [(Int, String, Int?, String)])
    func aWholeRequestsErrorMapsToTheStoresCode(status: Int, code: String, retryAfter: Int?, expected: String)
        async throws
    {
        let fixture = try CloudKitFixture()
        let bridge = try fixture.bridge(maxAttempts: 1)
        let provider = CloudKitProvider(id: "ck", bridge: bridge)
        _ = try await provider.set([KeyValue("zone.made", "1")])
        fixture.emulator.database.failNext(
            5, operation: "records/lookup", status: status, code: code, reason: "scripted", retryAfter: retryAfter)
        let error = await #expect(throws: CloudSyncError.self) { try await provider.get(["a", "b"]) }
        #expect(error?.code == ErrorCode(rawValue: expected))
        #expect(error?.provider == "ck")
        #expect(error?.retryAfterMs == retryAfter.map { $0 * 1000 })
        #expect(error?.isRetryable == (expected == "ERR_RATE_LIMITED" || expected == "ERR_SERVER"))
        if expected == "ERR_NOT_SIGNED_IN" { #expect(error?.message.contains("cloudsync login") == true) }
        #expect(error.map { !"\($0)".contains(CloudKitFixture.apiToken) && !"\($0)".contains("CK/1+") } == true)
    }

    @Test func throttlingIsWaitedOutAsCloudKitAsks() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        _ = try await provider.set([KeyValue("a", "1")])
        fixture.emulator.database.failNext(operation: "records/lookup", status: 429, code: "THROTTLED", retryAfter: 1)
        let started = ContinuousClock.now
        #expect(try await provider.get(["a"]).map { try? $0.get() } == ["1"])
        #expect(ContinuousClock.now - started >= .seconds(1))
        #expect(fixture.count("records/lookup") == 2)
    }

    @Test func theEmulatorsFaultPlansApply() async throws {
        let fixture = try CloudKitFixture()
        let metrics = ProviderMetrics()
        let bridge = CloudKitBridge(
            configuration: fixture.configuration(),
            webAuthToken: try CloudKitWebAuthToken(
                state: ProviderState(provider: "ck", store: InMemoryProviderStateStore()),
                fallback: fixture.emulator.webAuth.issueToken(
                    container: CloudKitFixture.container, environment: "development")),
            context: ProviderContext(providerID: "ck", metrics: metrics),
            retryPolicy: RetryPolicy(baseDelay: .milliseconds(1), maxDelay: .milliseconds(2)))
        let provider = CloudKitProvider(id: "ck", bridge: bridge)
        _ = try await provider.set([KeyValue("a", "1")])
        let lookup: HTTPRoutePattern = "POST /database/1/{container}/{environment}/private/records/lookup"
        fixture.host.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [1, 2], route: lookup)]))
        #expect(try await provider.get(["a"]).map { try? $0.get() } == ["1"])
        #expect(metrics.reading.retries == 2)
        fixture.host.server.setFaultPlan(HTTPFaultPlan([.resetMidBody(on: .calls([1]), route: lookup)]))
        #expect(try await provider.get(["a"]).map { try? $0.get() } == ["1"])
        fixture.host.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: Array(1...10), route: lookup)]))
        let error = await #expect(throws: CloudSyncError.self) { try await provider.get(["a"]) }
        #expect(error?.code == .server)
        #expect(error?.isRetryable == true)
    }

    @Test func tokensNeverReachTheLogAndARecordWithoutTheFieldIsADecodeError() async throws {
        let fixture = try CloudKitFixture()
        let lines = Mutex<[String]>([])
        let token = fixture.emulator.webAuth.issueToken(
            container: CloudKitFixture.container, environment: "development")
        let state = ProviderState(provider: "ck", store: InMemoryProviderStateStore())
        let bridge = CloudKitBridge(
            configuration: fixture.configuration(),
            webAuthToken: try CloudKitWebAuthToken(state: state, fallback: token),
            context: ProviderContext(
                providerID: "ck",
                logger: ProviderLogger(minimumLevel: .debug) { _, line in lines.withLock { $0.append(line) } }))
        let provider = CloudKitProvider(id: "ck", bridge: bridge)
        _ = try await provider.set([KeyValue("a", "1")])
        _ = try await bridge.saveRecords([
            CloudKitRecord(recordName: "foreign", recordType: "CloudSyncItem", fields: ["other": .int64(1)])
        ])
        let read = try await provider.get(["foreign"])
        #expect(read.first.map { if case .failure(let error) = $0 { error.code == .decode } else { false } } == true)
        let logged = lines.withLock { $0 }
        #expect(logged.count >= 4)
        let rotated = try #require(try state.credential(.cloudKitWebAuthToken))
        for line in logged {
            #expect(!line.contains(CloudKitFixture.apiToken) && !line.contains(token) && !line.contains(rotated))
            #expect(!line.contains("ckWebAuthToken"))
        }
    }

    @Test func perRecordErrorsAreTheKeysOwnAndABadRequestAboutTheTypeIsMisconfiguration() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider()
        let database = fixture.emulator.database
        database.failRecord("full", code: "QUOTA_EXCEEDED")
        database.failRecord("odd", code: "BAD_REQUEST", reason: "something about this record")
        let results = try await provider.set([KeyValue("full", "1"), KeyValue("fine", "2"), KeyValue("odd", "3")])
        #expect(results.map { $0.failureCode } == [.quotaExceeded, nil, .provider])
        if case .failure(let error) = results[0] { #expect(error.key == "full") }

        database.failRecord("typed", code: "BAD_REQUEST", reason: "invalid value type INT64 for field value")
        let typed = try await provider.set([KeyValue("typed", "1")])
        #expect(typed.first?.failureCode == .containerMisconfigured)
    }

    @Test func productionWithoutADeployedSchemaIsAMisconfiguredContainer() async throws {
        let fixture = try CloudKitFixture(environment: "production")
        let provider = try fixture.provider()
        let results = try await provider.set([KeyValue("a", "1")])
        #expect(results.first?.failureCode == .containerMisconfigured)
        if case .failure(let error) = results[0] { #expect(error.message.contains("production")) }
    }

    @Test func aDryRunNeitherWritesNorCreatesTheZone() async throws {
        let fixture = try CloudKitFixture()
        let provider = try fixture.provider(readOnly: true)
        #expect(try await provider.get(["a"]).map { try? $0.get() } == [nil])
        await #expect(throws: CloudSyncError.self) { try await provider.set([KeyValue("a", "1")]) }
        #expect(fixture.count("zones/modify") == 0)
    }

    @Test func aTwoMegabyteValueIsRefusedByThisTierAndRoutedToTheNext() async throws {
        let fixture = try CloudKitFixture()
        let cloudKit = try fixture.provider()
        let next = MemoryProvider(id: "files")
        let big = String(repeating: "x", count: 2 * 1024 * 1024)
        // Directly, the provider refuses it in its slot without sending it.
        fixture.host.server.clearLog()
        #expect(try await cloudKit.set([KeyValue("big", big)]).first?.failureCode == .payloadTooLarge)
        #expect(fixture.host.server.requestLog.isEmpty)

        var options = StoreOptions()
        options.writeMode = .failover
        // No deadline: under the loaded suite the emulator's availability answer can take longer than 15 s, and the
        // store would then route the small value past an unavailable CloudKit, which is not what this checks.
        options.timeout = nil
        let store = try CloudStore(providers: [cloudKit, next], options: options)
        let receipt = try await store.set(big, forKey: "big")
        #expect(receipt.stored == ["files"])
        #expect(receipt.skippedTooLarge == ["ck"])
        let small = try await store.set("small", forKey: "small")
        #expect(small.stored == ["ck"])
        #expect(try await store.get("big") == big)
        #expect(
            fixture.emulator.database.recordNames(
                container: CloudKitFixture.container, environment: "development", zone: "CloudSyncZone") == ["small"])

        // With no larger tier, it fits nowhere.
        let alone = try CloudStore(providers: [try fixture.provider(id: "ck2")], options: options)
        let error = await #expect(throws: CloudSyncError.self) { try await alone.set(big, forKey: "big") }
        #expect(error?.code == .payloadTooLarge)
        await store.close()
        await alone.close()
    }
}

extension Result where Failure == CloudSyncError {
    /// The error's code, or nil for a success.
    var failureCode: ErrorCode? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}

/// One reading the emulator can serve of what CloudKit's documentation leaves open.
struct CloudKitReading: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let apply: @Sendable (inout CloudKitDatabaseEmulator.Configuration) -> Void

    /// Every reading: each way a missing zone, an expired sync token and the default zone can be answered.
    static let all: [CloudKitReading] =
        CloudKitDatabaseEmulator.MissingZoneAnswer.allCases.map { answer in
            CloudKitReading(testDescription: "missingZone=\(answer)") { $0.missingZone = answer }
        }
        + CloudKitDatabaseEmulator.ExpiredTokenAnswer.allCases.map { answer in
            CloudKitReading(testDescription: "expiredToken=\(answer)") { $0.expiredToken = answer }
        }
        + CloudKitDatabaseEmulator.DefaultZoneAnswer.allCases.map { answer in
            CloudKitReading(testDescription: "defaultZoneRecords=\(answer)") { $0.defaultZoneRecords = answer }
        }
}

/// The provider and bridge under every reading of the emulator.
@Suite struct CloudKitReadingTests {
    /// Whatever the reading: the first write creates the zone, reads and removes work, the change feed names changes,
    /// and an expired token is `CK_TOKEN_EXPIRED` to the bridge (fetch again from nil, which finds everything) and
    /// `expired` to the store, which then compares in full.
    @Test(arguments: CloudKitReading.all)
    func theProviderSurvives(reading: CloudKitReading) async throws {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure(reading.apply)
        let provider = try fixture.provider(zone: "Fresh")
        #expect(try await provider.set([KeyValue("a", "1"), KeyValue("b", "2")]).allSatisfy { (try? $0.get()) != nil })
        #expect(try await provider.get(["a", "b", "c"]).map { try $0.get() } == ["1", "2", nil])
        let cursor = try #require(try await provider.changeFeedCursor())
        #expect(try await provider.remove(["a"]).allSatisfy { (try? $0.get()) != nil })
        #expect(try await provider.get(["a"]).map { try $0.get() } == [nil])
        guard case .changes(let page) = try await provider.changes(since: cursor, limit: 10) else {
            Issue.record("a fresh token was refused")
            return
        }
        #expect(page.changes.map(\.key) == ["a"] && page.changes.map(\.removed) == [true])

        fixture.emulator.database.expireChangeTokens(
            container: CloudKitFixture.container, environment: fixture.environment, zone: "Fresh")
        guard case .expired = try await provider.changes(since: page.cursor, limit: 10) else {
            Issue.record("an expired token was not recognised")
            return
        }
        let bridge = try fixture.bridge(zone: "Fresh")
        let error = await #expect(throws: CloudKitError.self) { try await bridge.fetchChanges(since: page.cursor) }
        #expect(error?.code == .tokenExpired)
        #expect(try await bridge.fetchChanges(since: nil).records.map(\.recordName) == ["b"])
    }

    /// A bridge on `_defaultZone` saves, reads and deletes records (assets too) where the database keeps them there.
    ///
    /// Where it refuses them, the refusal is `CK_BAD_INPUT`. The default zone has no change feed either way.
    @Test(arguments: CloudKitDatabaseEmulator.DefaultZoneAnswer.allCases)
    func aBridgeOnTheDefaultZone(answer: CloudKitDatabaseEmulator.DefaultZoneAnswer) async throws {
        let fixture = try CloudKitFixture()
        fixture.emulator.database.configure { $0.defaultZoneRecords = answer }
        let bridge = try fixture.bridge(zone: "_defaultZone")
        try await bridge.ensureZone()
        switch answer {
        case .accepted:
            #expect(try await bridge.saveRecords([item("d", "1")]).saved.map(\.recordName) == ["d"])
            #expect(try await bridge.lookup(["d"]).first?.get()?.fields["value"] == .string("1"))
            let directory = try TemporaryDirectory()
            _ = try CloudKitAssetTests.writeFile(directory.file("in.bin"), count: 5000)
            _ = try await CloudKitAssetTests.saveDocument(bridge, "doc", file: directory.file("in.bin"))
            _ = try await bridge.downloadAsset(recordName: "doc", fieldName: "file", to: directory.file("out.bin"))
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: directory.file("out.bin")))
                    == Data(contentsOf: URL(fileURLWithPath: directory.file("in.bin"))))
            #expect(try await bridge.deleteRecords(["d", "doc"]).allSatisfy { (try? $0.get()) != nil })
            #expect(try await bridge.lookup(["d"]).first?.get() == nil)
        case .refused:
            let error = await #expect(throws: CloudKitError.self) { try await bridge.saveRecords([item("d", "1")]) }
            #expect(error?.code == .badInput)
        }
        let changes = await #expect(throws: CloudKitError.self) { try await bridge.fetchChanges(since: nil) }
        #expect(changes?.code == .badInput)
    }
}
