import CloudSyncTesting
import Testing

/// The incremental-equals-full property over hundreds of seeds, each also choosing the order in which the sync's
/// concurrent provider calls finish: a sync whose result depends on scheduling fails here with the seed that shows it.
@Suite(.enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct SyncDeterminismStressTests {
    /// Seeds: 250 (CI's time), or 2,000 under `CLOUDSYNC_STRESS=full`.
    static let seeds = StressSize.pick(ci: 250, full: 2_000)

    @Test func incrementalEqualsFullOverSeededHistoriesAndSchedules() async throws {
        // Four seeds at a time: the stress phase runs its suites one by one, and a seed waits on fsync much of the time.
        let differences = try await withThrowingTaskGroup(of: [String].self) { group in
            var next: UInt64 = 1
            func start() {
                let seed = next
                next += 1
                group.addTask {
                    try await IncrementalAgainstFull.run(seed: seed, rounds: 12, scheduled: true).differences
                }
            }
            for _ in 0..<4 { start() }
            var found: [String] = []
            while let differences = try await group.next() {
                found += differences
                if next <= UInt64(Self.seeds) { start() }
            }
            return found
        }
        #expect(differences == [], "\(differences.count) differences over \(Self.seeds) seeds")
    }
}
