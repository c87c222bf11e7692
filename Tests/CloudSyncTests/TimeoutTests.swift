import CloudSync
import CloudSyncTesting
import Testing

@Suite struct TimeoutTests {
    let clock = ManualClock()

    private func store(_ providers: [any Provider], onError: ErrorLog? = nil) throws -> CloudStore {
        try makeStore(providers) {
            $0.clock = clock
            $0.timeout = .seconds(5)
            $0.onError = onError?.handler
        }
    }

    @Test(arguments: [FaultInjectingProvider.Hang.untilCancelled, .forever])
    func aHungAvailabilityProbeFallsThroughWithinOneTimeout(_ hang: FaultInjectingProvider.Hang) async throws {
        let stuck = makeProvider("cloudKit")
        let drive = makeProvider("googleDrive")
        _ = try await drive.set([KeyValue("k", "from drive")])
        stuck.hang(.isAvailable, hang)
        let store = try store([stuck, drive])

        let read = Task { try await store.get("k") }
        // Drive has answered its probe (its deadline is gone) and only the hung probe's deadline is left.
        try await waitUntil {
            stuck.isHanging(.isAvailable) && drive.calls(.isAvailable) == 1 && clock.sleeperCount == 1
        }
        clock.advance(by: .seconds(5))
        #expect(try await read.value == "from drive")
        #expect(stuck.calls(.get) == 0)
    }

    @Test func theProbeAnswerIsMemoisedSoTheNextReadDoesNotWaitAgain() async throws {
        let stuck = makeProvider("cloudKit")
        let drive = makeProvider("googleDrive")
        stuck.hang(.isAvailable)
        let store = try store([stuck, drive])
        let first = Task { try await store.get("k") }
        try await waitUntil {
            stuck.isHanging(.isAvailable) && drive.calls(.isAvailable) == 1 && clock.sleeperCount == 1
        }
        clock.advance(by: .seconds(5))
        _ = try await first.value
        // Within the memo's lifetime no probe runs, so nothing sleeps on the clock.
        #expect(try await store.get("k") == nil)
        #expect(stuck.calls(.isAvailable) == 1)
        #expect(drive.calls(.isAvailable) == 1)
        clock.advance(by: .seconds(31))
        stuck.hang(.isAvailable, nil)
        #expect(try await store.get("k") == nil)
        #expect(stuck.calls(.isAvailable) == 2)
    }

    @Test func aHungReadTimesOutAndFallsThrough() async throws {
        let slow = makeProvider("slow")
        let drive = makeProvider("googleDrive")
        _ = try await slow.set([KeyValue("k", "slow value")])
        _ = try await drive.set([KeyValue("k", "drive value")])
        let errors = ErrorLog()
        let store = try store([slow, drive], onError: errors)
        _ = try await store.get("warm-up")  // memoise availability so only the read sleeps below
        slow.hang(.get, .forever)

        let read = Task { try await store.get("k") }
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        #expect(try await read.value == "drive value")
        #expect(errors.all.map(\.code) == [.timeout])
        #expect(errors.all.first?.provider == "slow")
        #expect(errors.all.first?.message == "no answer within 5000 ms")
    }

    @Test func aHungWriteIsATimeoutWhichIsRetryable() async throws {
        let drive = makeProvider("googleDrive")
        let store = try makeStore([drive]) {
            $0.clock = clock
            $0.timeout = .seconds(5)
            $0.outbox = try! makeOutbox()
        }
        _ = try await store.get("warm-up")
        drive.hang(.set)
        let write = Task { try await store.set("v", forKey: "k") }
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        #expect(try await write.value.queued == ["googleDrive"])
        #expect(store.pendingWrites().first?.lastErrorCode == "ERR_TIMEOUT")
    }

    @Test func aCallThatAnswersInTimeIsNotCutShort() async throws {
        let drive = FaultInjectingProvider(id: "googleDrive", clock: clock)
        let store = try store([drive])
        _ = try await store.get("warm-up")
        drive.setLatency(.seconds(4))
        let write = Task { try await store.set("v", forKey: "k") }
        try await clock.waitForSleepers(2)  // the provider's latency and the store's deadline
        clock.advance(by: .seconds(4))
        #expect(try await write.value.stored == ["googleDrive"])
    }

    @Test func cancellingTheCallerCancelsTheCall() async throws {
        let drive = makeProvider("googleDrive")
        let store = try store([drive])
        _ = try await store.get("warm-up")
        drive.hang(.get, .untilCancelled)
        let read = Task { try await store.get("k") }
        try await waitUntil { drive.isHanging(.get) }
        read.cancel()
        // The caller hears that it cancelled (not a provider failure), and the provider's call was cancelled too:
        // its hang, which ends only on cancellation, is over.
        await #expect {
            try await read.value
        } throws: { error in
            (error as? CloudSyncError)?.code == .cancelled
        }
        try await waitUntil { !drive.isHanging(.get) }
        #expect(!drive.isHanging(.get))
    }
}

/// A provider that sends one request per key, `requestsAtOnce` at a time, each round taking `round` on `clock`.
final class RoundTripProvider: ForwardingProvider {
    let wrapped: any Provider
    let capabilities: ProviderCapabilities
    let clock: ManualClock
    let round: Duration

    init(clock: ManualClock, round: Duration, requestsAtOnce: Int) {
        wrapped = MemoryProvider(id: "s3")
        capabilities = ProviderCapabilities(batchLimit: 1000, requestsAtOnce: requestsAtOnce)
        self.clock = clock
        self.round = round
    }

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        let rounds = (items.count + capabilities.requestsAtOnce! - 1) / capabilities.requestsAtOnce!
        for _ in 0..<rounds { try await clock.sleep(for: round) }
        return try await wrapped.set(items)
    }
}

@Suite struct PerRequestDeadlineTests {
    /// The two pipelines on one moto: a 1,000-object S3 batch, 16 requests at a time, each round 4 s of a
    /// 15 s deadline; the store cut the whole batch off at 15 s and failed every key with ERR_TIMEOUT.
    @Test func aBatchOfManyRequestsGetsADeadlinePerRoundOfThem() async throws {
        let clock = ManualClock()
        let s3 = RoundTripProvider(clock: clock, round: .seconds(4), requestsAtOnce: 16)
        let store = try makeStore([s3]) {
            $0.clock = clock
            $0.timeout = .seconds(15)
        }
        let items = (0..<1000).map { KeyValue("object.\($0)", "v") }
        let write = Task { try await store.multiSet(items) }
        // 63 rounds of 4 s: the clock moves a round at a time while the provider sleeps through them.
        for _ in 0..<63 {
            try await waitUntil { clock.sleeperCount == 2 }
            clock.advance(by: .seconds(4))
        }
        let results = try await write.value
        #expect(
            results.allSatisfy { (try? $0.get()) != nil },
            "\(results.first { (try? $0.get()) == nil }.map { "\($0)" } ?? "")")
        #expect(try await s3.get(["object.999"]).map { try $0.get() } == ["v"])
    }
}
