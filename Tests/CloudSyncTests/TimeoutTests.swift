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
