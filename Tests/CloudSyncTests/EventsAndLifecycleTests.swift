import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

/// Collects events and lets a test wait for the n-th.
final class EventInbox<Event: Sendable>: Sendable {
    private let state = Mutex<(events: [Event], waiters: [(Int, CheckedContinuation<Void, Never>)])>(([], []))

    func append(_ event: Event) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.events.append(event)
            let count = state.events.count
            defer { state.waiters.removeAll { $0.0 <= count } }
            return state.waiters.filter { $0.0 <= count }.map(\.1)
        }
        for waiter in ready { waiter.resume() }
    }

    func wait(for count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.events.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    var events: [Event] { state.withLock { $0.events } }
}

@Suite struct AccountEventTests {
    let accountAware = ProviderCapabilities(emitsAccountEvents: true, emitsRemoteChanges: true)

    @Test func eventsFromEveryProviderMergeAndOneSystemEventArrivesOnce() async throws {
        let icloud = makeProvider("icloudKV", accountAware)
        let cloudKit = makeProvider("cloudKit", ProviderCapabilities(emitsAccountEvents: true))
        let store = try makeStore([icloud, cloudKit])
        let inbox = EventInbox<AccountEvent>()
        let subscription = store.onAccountChange { inbox.append($0) }

        icloud.emitAccountEvent(identityChanged: false, status: .temporarilyUnavailable, eventID: "sys-1")
        cloudKit.emitAccountEvent(identityChanged: false, status: .temporarilyUnavailable, eventID: "sys-1")
        cloudKit.emitAccountEvent(identityChanged: false, status: .available, eventID: "sys-2")
        await inbox.wait(for: 2)
        #expect(inbox.events.map(\.eventID) == ["sys-1", "sys-2"])
        #expect(inbox.events.map(\.provider) == ["icloudKV", "cloudKit"])
        subscription.cancel()
    }

    @Test func anIdentityChangeDropsAvailabilityClearsCachesAndAbandonsTheOutbox() async throws {
        let icloud = makeProvider("icloudKV", accountAware)
        let drive = makeProvider("googleDrive")
        let drops = DropLog()
        let store = try makeStore([icloud, drive]) { $0.outbox = try! makeOutbox(drops: drops) }
        icloud.fail(.set, with: offline, times: 1)
        #expect(try await store.set("written by the old user", forKey: "q").queued == ["icloudKV"])
        #expect(icloud.calls(.isAvailable) == 1)
        _ = try await store.get("k")
        #expect(icloud.calls(.isAvailable) == 1)  // memoised

        let inbox = EventInbox<AccountEvent>()
        _ = store.onAccountChange { event in
            // By the time listeners hear of it, every provider's caches are already cleared.
            #expect(icloud.clearCachesCalls == 1)
            #expect(drive.clearCachesCalls == 1)
            inbox.append(event)
        }
        icloud.emitAccountEvent(identityChanged: true, eventID: "switch")
        await inbox.wait(for: 1)
        #expect(drops.reasons == [.accountChanged])
        #expect(drops.keys == ["q"])
        #expect(store.pendingWrites().isEmpty)
        _ = try await store.get("k")
        #expect(icloud.calls(.isAvailable) == 2)  // asked again after the switch
    }

    @Test func aStatusChangeWithoutIdentityChangeKeepsCachesAndQueuedWrites() async throws {
        let icloud = makeProvider("icloudKV", accountAware)
        let drops = DropLog()
        let store = try makeStore([icloud]) { $0.outbox = try! makeOutbox(drops: drops) }
        icloud.fail(.set, with: offline, times: 1)
        try await store.set("v", forKey: "q")
        let inbox = EventInbox<AccountEvent>()
        _ = store.onAccountChange { inbox.append($0) }
        icloud.emitAccountEvent(identityChanged: false, status: .temporarilyUnavailable)
        await inbox.wait(for: 1)
        #expect(icloud.clearCachesCalls == 0)
        #expect(drops.reasons.isEmpty)
        #expect(store.pendingWrites().count == 1)
    }

    @Test func remoteChangesComeOnlyFromProvidersThatHaveThem() async throws {
        let icloud = makeProvider("icloudKV", accountAware)
        let cloudKit = makeProvider("cloudKit", ProviderCapabilities(emitsAccountEvents: true))
        let store = try makeStore([icloud, cloudKit])
        let inbox = EventInbox<RemoteChange>()
        _ = store.onRemoteChange { inbox.append($0) }
        // cloudKit declares no remote changes: whatever it emits never reaches the store's listeners.
        cloudKit.emitRemoteChange(keys: ["ignored"])
        icloud.emitRemoteChange(keys: ["theme"])
        await inbox.wait(for: 1)
        #expect(inbox.events == [RemoteChange(provider: "icloudKV", keys: ["theme"])])
    }

    @Test func closeStopsEverything() async throws {
        /// A provider whose subscriptions ignore cancellation, so its events still reach the store after close:
        /// only the store's own guard keeps them from listeners.
        final class Leaky: ForwardingProvider {
            let wrapped: any Provider = MemoryProvider(id: "leaky")
            var capabilities: ProviderCapabilities {
                ProviderCapabilities(emitsAccountEvents: true, emitsRemoteChanges: true)
            }
            let remote = Mutex<(@Sendable (RemoteChange) -> Void)?>(nil)
            let account = Mutex<(@Sendable (AccountEvent) -> Void)?>(nil)
            func subscribeToRemoteChanges(_ handler: @escaping @Sendable (RemoteChange) -> Void)
                -> ProviderSubscription?
            {
                remote.withLock { $0 = handler }
                return ProviderSubscription {}
            }
            func subscribeToAccountChanges(_ handler: @escaping @Sendable (AccountEvent) -> Void)
                -> ProviderSubscription?
            {
                account.withLock { $0 = handler }
                return ProviderSubscription {}
            }
        }
        let leaky = Leaky()
        let drops = DropLog()
        let store = try makeStore([leaky]) { $0.outbox = try! makeOutbox(drops: drops) }
        let changes = EventInbox<RemoteChange>()
        let accounts = EventInbox<AccountEvent>()
        _ = store.onRemoteChange { changes.append($0) }
        _ = store.onAccountChange { accounts.append($0) }
        store.close()
        leaky.remote.withLock { $0 }?(RemoteChange(provider: "leaky", keys: nil))
        leaky.account.withLock { $0 }?(AccountEvent(identityChanged: true, status: .available, provider: "leaky"))
        // Remote changes reach listeners synchronously, so nothing is on its way: the guard dropped it.
        #expect(changes.events.isEmpty)
        #expect(accounts.events.isEmpty)
        let error = await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(error?.code == .closed)
    }
}

@Suite struct ConfigurationTests {
    @Test func registeringAProviderAppendsItToThePreferenceOrder() async throws {
        let store = try makeStore([makeProvider("first")])
        let fake = MemoryProvider(id: "fake")
        _ = try await fake.set([KeyValue("k", "from the fake")])
        try store.register(fake)
        #expect(store.providerIDs == ["first", "fake"])
        #expect(try await store.get("k") == "from the fake")
        let error = #expect(throws: CloudSyncError.self) { try store.register(MemoryProvider(id: "fake")) }
        #expect(error?.code == .config)
    }

    @Test func attachedProvidersAreReachableByIDButOutsideRouting() async throws {
        let primary = makeProvider("primary")
        let archive = makeProvider("archive")
        let store = try CloudStore(
            providers: [primary], attached: [archive],
            options: {
                var o = StoreOptions()
                o.timeout = nil
                o.writeMode = .mirror
                return o
            }())
        #expect(try await store.set("v", forKey: "k").stored == ["primary"])
        #expect(try await raw(archive, "k") == nil)
        #expect(try await store.maintenance.migrate(from: "primary", to: "archive").copied == ["k"])
        _ = try await archive.set([KeyValue("only-archived", "x")])
        #expect(try await store.get("only-archived") == nil)
        #expect(try await store.allKeys().keys == ["k"])
        #expect(try await store.maintenance.verify(provider: "archive").ok == 2)
        #expect(throws: CloudSyncError.self) {
            try CloudStore(providers: [primary], attached: [makeProvider("primary")])
        }
    }

    @Test func duplicateIDsAreRefused() {
        let error = #expect(throws: CloudSyncError.self) {
            try CloudStore(providers: [MemoryProvider(id: "a"), MemoryProvider(id: "a")])
        }
        #expect(error?.message == "two providers share the id a; give each provider its own id")
    }

    @Test func retryableCodesAreExactlyTheOnesThatMayPass() {
        let retryable = ErrorCode.all.filter(\.isRetryable)
        #expect(retryable == [.timeout, .offline, .rateLimited, .accountUnavailable, .server, .locked])
        #expect(Set(ErrorCode.all.map(\.rawValue)).count == ErrorCode.all.count)
        #expect(ErrorCode.all.allSatisfy { $0.rawValue.hasPrefix("ERR_") })
    }

    @Test func errorDescriptionsNameProviderKeyAndWait() {
        let error = CloudSyncError(.rateLimited, "slow down", provider: "googleDrive", key: "theme", retryAfterMs: 2000)
        #expect(
            error.description
                == "ERR_RATE_LIMITED [provider googleDrive, key \"theme\", retry after 2000 ms]: slow down")
    }
}

@Suite struct ConformanceTests {
    @Test func theMemoryProviderConforms() async {
        let plain = await ProviderConformanceSuite.run { MemoryProvider(id: "memory") }
        #expect(plain.isEmpty, "\(plain)")
        let constrained = await ProviderConformanceSuite.run {
            MemoryProvider(
                id: "capped",
                capabilities: ProviderCapabilities(
                    maxValueBytes: 1000, batchLimit: 3, canList: false, reportsQuota: true))
        }
        #expect(constrained.isEmpty, "\(constrained)")
    }

    @Test func aFaultFreeWrapperConforms() async {
        let failures = await ProviderConformanceSuite.run { FaultInjectingProvider(id: "wrapped") }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func theSuiteCatchesABrokenProvider() async {
        let failures = await ProviderConformanceSuite.run {
            let provider = FaultInjectingProvider(id: "broken")
            provider.fail(key: "conformance.b", with: CloudSyncError(.provider, "lost it"))
            return provider
        }
        #expect(failures.contains { $0.hasPrefix("batch results are positional:") })
    }
}

@Suite struct ForwardingConformanceTests {
    @Test func theFaultInjectingWrapperForwardsEverything() async {
        #expect(await ProviderConformanceSuite.runForwarding { FaultInjectingProvider($0) } == [])
    }

    @Test func theForwardingCheckCatchesAWrapperThatDropsEvents() async {
        /// Written against `Provider` alone, as the runner's wrappers once were: events and close never arrive.
        struct Forgetful: Provider {
            let wrapped: any Provider
            var id: String { wrapped.id }
            var capabilities: ProviderCapabilities { wrapped.capabilities }
            func availability() async -> Availability { await wrapped.availability() }
            func get(_ keys: [String]) async throws -> [Result<String?, CloudSyncError>] { try await wrapped.get(keys) }
            func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
                try await wrapped.set(items)
            }
            func remove(_ keys: [String]) async throws -> [Result<Void, CloudSyncError>] {
                try await wrapped.remove(keys)
            }
            func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
                try await wrapped.listKeys(after: cursor, limit: limit)
            }
        }
        let failures = await ProviderConformanceSuite.runForwarding { Forgetful(wrapped: $0) }
        #expect(failures.contains("forwarding: an account event of the wrapped provider reached 0 handlers"))
        #expect(failures.contains("forwarding: clearCaches() reached the wrapped provider 0 times"))
        #expect(failures.contains("forwarding: close() reached the wrapped provider 0 times"))
    }
}
