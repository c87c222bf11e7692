import CloudSync
import CloudSyncTesting
import Testing

@Suite struct OutboxTests {
    let clock = ManualClock()
    let drive = makeProvider("googleDrive")
    let drops = DropLog()
    let errors = ErrorLog()

    private func store(_ limits: Outbox.Limits = Outbox.Limits(), backoff: Outbox.Backoff? = nil) throws -> CloudStore {
        let outbox = try Outbox(
            storage: InMemoryOutboxStorage(), limits: limits, backoff: backoff ?? Outbox.Backoff(jitter: { 1 }),
            onDropped: drops.handler)
        return try makeStore([drive]) {
            $0.outbox = outbox
            $0.clock = clock
            $0.onError = errors.handler
        }
    }

    @Test func theBackoffScheduleDoublesAndGivesUpAfterTwelveAttempts() async throws {
        let store = try store()
        drive.fail(.set, with: offline)
        try await store.set("v", forKey: "k")
        var waits: [Int64] = []
        var previous = clock.nowMilliseconds()
        while let entry = store.pendingWrites().first {
            let wait = entry.nextAttemptAtMs - clock.nowMilliseconds()
            clock.advance(by: .milliseconds(wait - 1))
            #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 1, dropped: 0))  // not yet due
            clock.advance(by: .milliseconds(1))
            _ = try await store.flushOutbox()
            waits.append(clock.nowMilliseconds() - previous)
            previous = clock.nowMilliseconds()
        }
        #expect(waits == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048].map { Int64($0 * 1000) })
        #expect(waits.reduce(0, +) == 4_094_000)  // about 68 minutes at full jitter, 34 at none
        #expect(drive.calls(.set) == 12)
        #expect(drops.reasons == [.tooManyAttempts])
    }

    @Test func jitterKeepsEachWaitBetweenHalfAndAllOfTheStep() {
        let low = Outbox.Backoff(jitter: { 0 })
        let high = Outbox.Backoff(jitter: { 1 })
        let real = Outbox.Backoff()
        for attempts in 1...11 {
            let full = Int64(2000) << (attempts - 1)
            #expect(low.delayMilliseconds(afterAttempts: attempts) == full / 2)
            #expect(high.delayMilliseconds(afterAttempts: attempts) == full)
            #expect((full / 2...full).contains(real.delayMilliseconds(afterAttempts: attempts)))
        }
        #expect(high.delayMilliseconds(afterAttempts: 30) == 3_600_000)  // capped
    }

    @Test func aServersRetryAfterReplacesTheBackoff() async throws {
        let store = try store()
        drive.fail(.set, with: CloudSyncError(.rateLimited, "slow down", retryAfterMs: 30_000))
        try await store.set("v", forKey: "k")
        #expect(store.pendingWrites().first?.nextAttemptAtMs == clock.nowMilliseconds() + 30_000)
        clock.advance(by: .seconds(30))
        _ = try await store.flushOutbox()
        #expect(store.pendingWrites().first?.attempts == 2)
        #expect(store.pendingWrites().first?.nextAttemptAtMs == clock.nowMilliseconds() + 30_000)
    }

    @Test func aFlushDeliversDueWritesAndRemoves() async throws {
        let store = try store()
        _ = try await drive.set([KeyValue("gone", "x")])
        drive.fail(.set, with: offline)
        drive.fail(.remove, with: offline)
        try await store.set("v1", forKey: "a")
        try await store.set("v2", forKey: "b")
        try await store.remove("gone")
        #expect(store.pendingWrites().map(\.key) == ["a", "b", "gone"])
        drive.fail(.set, with: offline, times: 0)
        drive.fail(.remove, with: offline, times: 0)
        drive.resetCounts()
        clock.advance(by: .seconds(2))
        #expect(try await store.flushOutbox() == FlushResult(drained: 3, remaining: 0, dropped: 0))
        #expect(drive.calls(.set) == 1)  // both sets in one batch
        #expect(drive.calls(.remove) == 1)
        #expect(try await raw(drive, "a") == "v1")
        #expect(try await raw(drive, "gone") == nil)
    }

    @Test func aRetryThatCannotPassIsReportedAndDropped() async throws {
        let store = try store()
        drive.fail(.set, with: offline)
        try await store.set("v", forKey: "k")
        drive.fail(.set, with: signedOut)
        clock.advance(by: .seconds(2))
        #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 0, dropped: 1))
        #expect(drops.reasons == [.notRetryable])
        #expect(errors.all.map(\.code) == [.notSignedIn])
    }

    @Test func anUnavailableProviderKeepsItsEntriesWithoutSpendingAttempts() async throws {
        let store = try store()
        drive.fail(.set, with: offline)
        try await store.set("v", forKey: "k")
        drive.isAvailableNow = false
        clock.advance(by: .seconds(3600))
        #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 1, dropped: 0))
        #expect(store.pendingWrites().first?.attempts == 1)
    }

    @Test func whenFullTheOldestIsEvicted() async throws {
        let store = try store(Outbox.Limits(maxEntries: 3))
        drive.fail(.set, with: offline)
        for key in ["first", "second", "third"] {
            try await store.set("v", forKey: key)
            clock.advance(by: .milliseconds(1))
        }
        try await store.set("newer", forKey: "second")  // replaces its own entry: nothing evicted
        #expect(drops.reasons.isEmpty)
        try await store.set("v", forKey: "fourth")
        #expect(drops.reasons == [.queueFull])
        #expect(drops.keys == ["first"])
        #expect(store.pendingWrites().map(\.key) == ["third", "second", "fourth"])
    }

    @Test func entriesPastTheirAgeExpire() async throws {
        let store = try store(Outbox.Limits(maxAge: .seconds(3600)))
        drive.fail(.set, with: CloudSyncError(.rateLimited, "later", retryAfterMs: 10_000_000))
        try await store.set("v", forKey: "k")
        clock.advance(by: .seconds(3601))
        #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 0, dropped: 1))
        #expect(drops.reasons == [.expired])
    }

    @Test func aHeldProvidersEntriesAreNeitherSentNorExpiredAndWaitForTheNextOpen() async throws {
        let storage = InMemoryOutboxStorage()
        let outbox = try Outbox(
            storage: storage, limits: Outbox.Limits(maxAge: .seconds(3600)), backoff: Outbox.Backoff(jitter: { 1 }),
            onDropped: drops.handler)
        let store = try makeStore([drive]) {
            $0.outbox = outbox
            $0.clock = clock
        }
        drive.fail(.set, with: offline, times: 1)
        #expect(try await store.set("v", forKey: "k").queued == ["googleDrive"])
        #expect(outbox.hold("googleDrive") == 1)
        #expect(outbox.held == ["googleDrive": 1])
        clock.advance(by: .seconds(600))
        #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 1, dropped: 0))
        clock.advance(by: .seconds(7200))  // past the outbox's maximum age
        #expect(try await store.flushOutbox() == FlushResult(drained: 0, remaining: 1, dropped: 0))
        #expect(drive.calls(.set) == 1)
        #expect(drops.reasons.isEmpty)
        #expect(try storage.loadAll().count == 1)
        store.close()

        // The next open holds nothing unless told to: the entry, unchanged, is delivered.
        let reopened = try makeStore([drive]) {
            $0.outbox = try! Outbox(storage: storage, backoff: Outbox.Backoff(jitter: { 1 }))
            $0.clock = clock
        }
        #expect(reopened.pendingWrites().first?.attempts == 1)
        #expect(try await reopened.flushOutbox() == FlushResult(drained: 1, remaining: 0, dropped: 0))
        #expect(drive.calls(.set) == 2)
    }

    @Test func anAccountChangeOfOneProviderAbandonsOnlyItsEntries() async throws {
        let cloud = makeProvider("cloudKit")
        let outbox = try Outbox(storage: InMemoryOutboxStorage(), onDropped: drops.handler)
        let store = try makeStore([drive, cloud]) {
            $0.outbox = outbox
            $0.clock = clock
            $0.writeMode = .mirror
        }
        drive.fail(.set, with: offline, times: 1)
        cloud.fail(.set, with: offline, times: 1)
        #expect(try await store.set("v", forKey: "k").queued.sorted() == ["cloudKit", "googleDrive"])
        #expect(outbox.abandonForAccountChange(of: "googleDrive") == 1)
        #expect(drops.reasons == [.accountChanged])
        #expect(store.pendingWrites().map(\.provider) == ["cloudKit"])
    }

    @Test func discardingPendingWrites() async throws {
        let store = try store()
        drive.fail(.set, with: offline)
        for key in ["stuck", "a", "b"] { try await store.set("v", forKey: key) }
        #expect(store.discardPendingWrites { $0.key == "stuck" } == 1)
        #expect(store.pendingWrites().map(\.key) == ["a", "b"])
        #expect(store.discardPendingWrites() == 2)
        #expect(drops.reasons == [.discarded, .discarded, .discarded])
        #expect(store.pendingWrites().isEmpty)
    }

    @Test func autoFlushRunsOnItsIntervalUntilDisposed() async throws {
        drive.fail(.set, with: offline, times: 1)
        let store = try makeStore([drive]) {
            $0.outbox = try! makeOutbox()
            $0.clock = clock
            $0.autoFlushInterval = .seconds(60)
        }
        try await store.set("v", forKey: "k")
        try await clock.waitForSleepers(1)
        clock.advance(by: .seconds(60))
        try await waitUntil { store.pendingWrites().isEmpty }
        #expect(try await raw(drive, "k") == "v")
        store.close()
        try await waitUntil { clock.sleeperCount == 0 }
    }

    /// Found by `KeyIdentityPropertyTests`: a key whose removal waited in the outbox for a mirror provider was still
    /// listed by `allKeys` (it was still on that provider), though every read of it answered nil.
    @Test func aListingCountsQueuedChangesAsReadsDo() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        let store = try makeStore([first, second]) { options in
            options.writeMode = .mirror
            options.outbox = try? makeOutbox()
        }
        try await store.set("1", forKey: "gone")
        second.fail(.remove, with: offline)
        second.fail(.set, with: offline)
        try await store.remove("gone")
        try await store.set("2", forKey: "new")
        second.fail(.remove, with: offline, times: 0)
        second.fail(.set, with: offline, times: 0)
        #expect(store.pendingWrites().count == 2)
        #expect(try await store.get("gone") == nil)
        #expect(try await raw(second, "gone") == "1")
        #expect(try await store.allKeys().keys == ["new"])
        store.close()
    }
}
