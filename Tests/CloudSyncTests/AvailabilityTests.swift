import CloudSync
import CloudSyncTesting
import Synchronization
import Testing

/// A provider that is unavailable for a reason the test chooses, counting how often it is asked.
private final class Unavailable: ForwardingProvider {
    let wrapped: any Provider
    private let answer: Mutex<Availability>
    private let probes = Mutex(0)

    init(_ id: String, _ reason: UnavailableReason, _ detail: String) {
        wrapped = MemoryProvider(id: id)
        answer = Mutex(.unavailable(reason, detail))
    }

    var probeCount: Int { probes.withLock { $0 } }
    func set(answer newAnswer: Availability) { answer.withLock { $0 = newAnswer } }

    func availability() async -> Availability {
        probes.withLock { $0 += 1 }
        return answer.withLock { $0 }
    }
}

@Suite struct AvailabilityTests {
    let clock = ManualClock()

    private func store(_ providers: [any Provider], attached: [any Provider] = []) throws -> CloudStore {
        var options = StoreOptions()
        options.clock = clock
        options.timeout = .seconds(5)
        return try CloudStore(providers: providers, attached: attached, options: options)
    }

    @Test func theStoreSaysWhyAProviderIsUnavailableAndMemoisesTheAnswer() async throws {
        let drive = Unavailable("googleDrive", .signedOut, "sign in to Google Drive")
        let store = try store([drive])
        #expect(try await store.availability(of: "googleDrive") == .unavailable(.signedOut, "sign in to Google Drive"))
        drive.set(answer: .available)
        // Within the lifetime the memoised answer stands, and reads and writes share it.
        #expect(try await store.availability(of: "googleDrive").reason == .signedOut)
        await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(drive.probeCount == 1)
        clock.advance(by: StoreOptions().availabilityLifetime + .milliseconds(1))
        #expect(try await store.availability(of: "googleDrive") == .available)
        #expect(drive.probeCount == 2)
    }

    @Test func attachedProvidersCanBeAskedAndUnknownOnesAreAConfigurationError() async throws {
        let archive = Unavailable("archive", .offline, "the archive server is down")
        let store = try store([MemoryProvider(id: "primary")], attached: [archive])
        #expect(try await store.availability(of: "primary") == .available)
        #expect(try await store.availability(of: "archive").reason == .offline)
        let error = await #expect(throws: CloudSyncError.self) { try await store.availability(of: "nope") }
        #expect(error?.code == .config)
    }

    /// Lets a probe's two attempts use their shares of the 5 s deadline: two thirds, then the rest.
    private func expireProbeAttempts(of stuck: FaultInjectingProvider) async throws {
        for (attempt, share) in [(1, 3_334), (2, 1_666)] {
            try await waitUntil { stuck.calls(.isAvailable) == attempt && clock.sleeperCount == 1 }
            clock.advance(by: .milliseconds(share))
        }
    }

    @Test func aProbeThatDoesNotAnswerInTimeIsTimedOut() async throws {
        let stuck = makeProvider("cloudKit")
        stuck.hang(.isAvailable, .forever)
        let store = try store([stuck])
        let answer = Task { try await store.availability(of: "cloudKit") }
        try await expireProbeAttempts(of: stuck)
        let availability = try await answer.value
        #expect(availability.reason == .timedOut)
        #expect(availability.description.contains("did not answer in 2 attempts within 5000 ms"))
        // The timed-out answer is memoised like any other: asking again does not wait again.
        #expect(try await store.availability(of: "cloudKit").reason == .timedOut)
        #expect(stuck.calls(.isAvailable) == 2)
    }

    /// A probe is idempotent: one that hangs (a request lost on a dead connection) is asked again within the
    /// deadline, and a provider that answers the second time is available for the run.
    @Test func aHungProbeIsAskedAgainWithinTheDeadline() async throws {
        let stuck = makeProvider("googleDrive")
        stuck.hang(.isAvailable, .forever)
        let store = try store([stuck])
        let answer = Task { try await store.availability(of: "googleDrive") }
        try await waitUntil { stuck.isHanging(.isAvailable) && clock.sleeperCount == 1 }
        stuck.hang(.isAvailable, nil)
        clock.advance(by: .milliseconds(3_334))
        #expect(try await answer.value == .available)
        #expect(stuck.calls(.isAvailable) == 2)
    }

    @Test func noProviderNamesEachProviderWithItsReason() async throws {
        let stuck = makeProvider("cloudKit")
        stuck.hang(.isAvailable, .forever)
        let drive = Unavailable("googleDrive", .signedOut, "sign in to Google Drive")
        let store = try store([stuck, drive])
        let write = Task { try await store.set("v", forKey: "k") }
        try await waitUntil { drive.probeCount == 1 }
        try await expireProbeAttempts(of: stuck)
        let error = await #expect(throws: CloudSyncError.self) { try await write.value }
        #expect(error?.code == .noProvider)
        let message = try #require(error?.message)
        #expect(
            message.hasPrefix(
                "none of the configured providers is available: cloudKit (timedOut: the availability probe did not answer in 2 attempts"
            ))
        #expect(message.contains("; googleDrive (signedOut: sign in to Google Drive); check that each"))
        // Reads say the same, from the memoised answers.
        let read = await #expect(throws: CloudSyncError.self) { try await store.get("k") }
        #expect(read?.message == message)
    }
}
