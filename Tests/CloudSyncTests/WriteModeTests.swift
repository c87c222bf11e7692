import CloudSync
import CloudSyncTesting
import Testing

@Suite struct WriteModeTests {
    /// A failover write leaves what another device wrote to a later provider.
    ///
    /// The issue's fleet: an iPhone writes through CloudKit first, an Android phone only to Drive. A failover write
    /// goes to the first available provider alone; it removed the key from Drive too, erasing what the Android
    /// phone wrote there, and cost a request per provider.
    @Test func aFailoverWriteLeavesProvidersAfterItAlone() async throws {
        let cloudKit = makeProvider("cloudKit", Kind.record)
        let drive = makeProvider("googleDrive")
        _ = try await drive.set([KeyValue("shared", "written by the Android phone")])
        let store = try makeStore([cloudKit, drive])
        drive.resetCounts()
        let receipt = try await store.set("written by the iPhone", forKey: "shared")
        #expect(receipt.stored == ["cloudKit"])
        #expect(try await raw(cloudKit, "shared") == "written by the iPhone")
        #expect(try await raw(drive, "shared") == "written by the Android phone")
        #expect(drive.calls(.remove) == 0)
        #expect(drive.calls(.set) == 0)
    }

    /// What the cleanup is for stays: a value that grew past the first provider's cap goes to the next, and the first
    /// one's older copy, which a read would find first, is removed.
    @Test func aFailoverWriteRemovesTheOlderCopyAReadWouldFindFirst() async throws {
        let keyValue = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([keyValue, drive])
        try await store.set("small", forKey: "note")
        #expect(try await raw(keyValue, "note") == "small")
        let large = String(repeating: "x", count: 70_000)
        try await store.set(large, forKey: "note")
        #expect(try await raw(keyValue, "note") == nil)
        #expect(try await raw(drive, "note") == large)
        #expect(try await store.get("note") == large)
    }

    @Test func failoverWritesOnlyToTheFirstAvailableProviderAndReadsFallThrough() async throws {
        let phone = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([phone, drive])
        let receipt = try await store.set("dark", forKey: "theme")
        #expect(receipt.stored == ["icloudKV"])
        #expect(try await raw(phone, "theme") == "dark")
        #expect(try await raw(drive, "theme") == nil)

        phone.isAvailableNow = false
        let later = try makeStore([phone, drive])
        #expect(try await later.set("light", forKey: "font").stored == ["googleDrive"])
        _ = try await drive.set([KeyValue("only-on-drive", "x")])
        phone.isAvailableNow = true
        let reader = try makeStore([phone, drive])
        #expect(try await reader.get("theme") == "dark")
        #expect(try await reader.get("only-on-drive") == "x")
        #expect(try await reader.get("nowhere") == nil)
    }

    @Test func failoverLeavesTheAndroidPhoneNothingToRead() async throws {
        // Seed: an iPhone that only ever wrote to iCloud leaves an Android device nothing to read.
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let iPhone = try makeStore([icloud, drive])
        try await iPhone.set(#"{"favourites":[1,2]}"#, forKey: "favourites")

        icloud.isAvailableNow = false  // Android cannot reach iCloud
        let android = try makeStore([icloud, drive])
        #expect(try await android.get("favourites") == nil)
    }

    @Test func mirrorWritesEveryAvailableProviderSoAndroidFindsTheData() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let iPhone = try makeStore([icloud, drive]) { $0.writeMode = .mirror }
        #expect(try await iPhone.set("B", forKey: "favourites").stored == ["icloudKV", "googleDrive"])

        icloud.isAvailableNow = false
        let android = try makeStore([icloud, drive]) { $0.writeMode = .mirror }
        #expect(try await android.get("favourites") == "B")
    }

    @Test func mirrorWithOneDestinationOfflineResolvesAndReportsTheOther() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        drive.fail(.set, with: offline)
        let errors = ErrorLog()
        let store = try makeStore([icloud, drive]) {
            $0.writeMode = .mirror
            $0.onError = errors.handler
        }
        let receipt = try await store.set("v", forKey: "k")
        #expect(receipt.stored == ["icloudKV"])
        #expect(receipt.queued == [])
        #expect(errors.all.map(\.code) == [.offline])
        #expect(errors.all.first?.provider == "googleDrive")
        #expect(errors.all.first?.key == "k")
    }

    @Test func mirrorHandsFailedDestinationsToTheOutbox() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        drive.fail(.set, with: offline)
        let outbox = try makeOutbox()
        let store = try makeStore([icloud, drive]) {
            $0.writeMode = .mirror
            $0.outbox = outbox
            $0.codec = BracketCodec()
        }
        let receipt = try await store.set("v", forKey: "k")
        #expect(receipt == WriteReceipt(stored: ["icloudKV"], queued: ["googleDrive"]))
        let entry = try #require(store.pendingWrites().first)
        #expect(store.pendingWrites().count == 1)
        #expect(entry.key == "k")
        #expect(entry.provider == "googleDrive")
        #expect(entry.operation == .set)
        #expect(entry.encodedValue == "[enc:k:v]")
        // What the caller wrote, for a "pending sync" view: not the codec's ciphertext.
        #expect(entry.value == "v")
        #expect(entry.attempts == 1)
        #expect(entry.lastErrorCode == "ERR_OFFLINE")
        #expect(!entry.description.contains("[enc:k:v]"))
    }

    @Test func aDirectWriteThatReachesTheProviderSupersedesItsQueuedEntry() async throws {
        let drive = makeProvider("googleDrive")
        drive.fail(.set, with: offline, times: 1)
        let store = try makeStore([drive]) { $0.outbox = try! makeOutbox() }
        #expect(try await store.set("old", forKey: "k").queued == ["googleDrive"])
        #expect(try await store.set("new", forKey: "k").stored == ["googleDrive"])
        #expect(store.pendingWrites().isEmpty)
    }

    @Test func mirrorRejectsOnlyWhenNothingStoredIt() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        icloud.fail(.set, with: signedOut)
        drive.fail(.set, with: offline)
        let store = try makeStore([icloud, drive]) { $0.writeMode = .mirror }
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "k") }
        #expect(error?.code == .notSignedIn)
        #expect(error?.provider == "icloudKV")
    }

    @Test func deletesMirrorToo() async throws {
        let icloud = makeProvider("icloudKV", Kind.keyValue)
        let drive = makeProvider("googleDrive")
        let store = try makeStore([icloud, drive]) { $0.writeMode = .mirror }
        try await store.set("v", forKey: "k")
        #expect(try await store.remove("k").stored == ["icloudKV", "googleDrive"])
        #expect(try await raw(icloud, "k") == nil)
        #expect(try await raw(drive, "k") == nil)
        #expect(try await store.get("k") == nil)
    }

    /// The reference design removes from the first available provider only, which leaves a copy on a later provider
    /// (a tiered value, or one written while the first was away) for the next read to return: after `remove(k)`
    /// succeeds, `get(k)` returns nil.
    @Test func failoverRemovesFromEveryAvailableProviderSoTheKeyStaysRemoved() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        _ = try await first.set([KeyValue("k", "1")])
        _ = try await second.set([KeyValue("k", "2")])
        let store = try makeStore([first, second])
        #expect(try await store.remove("k").stored == ["first", "second"])
        #expect(try await raw(second, "k") == nil)
        #expect(try await store.get("k") == nil)
    }

    @Test func failoverRetryableFailureRejectsWithoutAnOutboxAndQueuesWithOne() async throws {
        let drive = makeProvider("googleDrive")
        drive.fail(.set, with: offline)
        let plain = try makeStore([drive])
        let error = await #expect(throws: CloudSyncError.self) { try await plain.set("v", forKey: "k") }
        #expect(error?.code == .offline)
        #expect(error?.isRetryable == true)

        let queued = try makeStore([drive]) { $0.outbox = try! makeOutbox() }
        #expect(try await queued.set("v", forKey: "k") == WriteReceipt(queued: ["googleDrive"]))
        #expect(queued.pendingWrites().map(\.provider) == ["googleDrive"])
    }

    @Test func failuresTheUserMustActOnAreNeverQueued() async throws {
        let drive = makeProvider("googleDrive")
        let store = try makeStore([drive]) { $0.outbox = try! makeOutbox() }
        for error in [signedOut, CloudSyncError(.quotaExceeded, "full")] {
            drive.fail(.set, with: error)
            let thrown = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "k") }
            #expect(thrown?.code == error.code)
        }
        #expect(store.pendingWrites().isEmpty)
    }

    @Test func removesThatFailAreQueuedAsRemoves() async throws {
        let drive = makeProvider("googleDrive")
        drive.fail(.remove, with: CloudSyncError(.rateLimited, "slow down", retryAfterMs: 1500))
        let clock = ManualClock()
        let store = try makeStore([drive]) {
            $0.outbox = try! makeOutbox()
            $0.clock = clock
        }
        #expect(try await store.remove("k").queued == ["googleDrive"])
        let entry = try #require(store.pendingWrites().first)
        #expect(entry.operation == .remove)
        #expect(entry.encodedValue == nil)
        #expect(entry.lastErrorCode == "ERR_RATE_LIMITED")
        #expect(entry.nextAttemptAtMs == clock.nowMilliseconds() + 1500)
    }

    @Test func noAvailableProviderIsItsOwnError() async throws {
        let drive = makeProvider("googleDrive")
        drive.isAvailableNow = false
        let store = try makeStore([drive])
        let error = await #expect(throws: CloudSyncError.self) { try await store.set("v", forKey: "k") }
        #expect(error?.code == .noProvider)
        #expect(error?.message.contains("googleDrive") == true)
        let read = await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(read?.code == .noProvider)
    }

    @Test func aReadFailsOnlyWhenNoProviderCouldAnswer() async throws {
        let first = makeProvider("first")
        let second = makeProvider("second")
        first.fail(.get, with: offline)
        let errors = ErrorLog()
        let store = try makeStore([first, second]) { $0.onError = errors.handler }
        #expect(try await store.get("k") == nil)
        #expect(errors.all.map(\.provider) == ["first"])
        second.fail(.get, with: offline)
        let error = await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(error?.code == .offline)
    }
}

extension CloudSyncError {
    /// The same error naming `provider` and `key`, as the store attributes it.
    func attributed(_ provider: String, _ key: String) -> CloudSyncError {
        var copy = self
        copy.provider = provider
        copy.key = key
        return copy
    }
}
