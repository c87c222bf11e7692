import CloudSync
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// A provider whose `set` calls stall when told to, ignoring cancellation as a stuck socket does, and land only when
/// the test releases them, in whatever order it chooses.
final class StallingProvider: ForwardingProvider {
    let wrapped: any Provider
    private let state = Mutex<(stallNext: Bool, stalled: [CheckedContinuation<Void, Never>], running: Int)>(
        (false, [], 0))

    init(_ wrapped: any Provider) { self.wrapped = wrapped }

    /// Makes the next `set` call stall until ``release(_:)``.
    func stallNext() { state.withLock { $0.stallNext = true } }

    /// No later call stalls.
    func stopStalling() { state.withLock { $0.stallNext = false } }

    var stalledCount: Int { state.withLock { $0.stalled.count } }
    /// Calls still inside `set`, stalled or not.
    var running: Int { state.withLock { $0.running } }

    /// Lets the stalled call at `index` (modulo their number) land.
    func release(_ index: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.stalled.isEmpty ? nil : state.stalled.remove(at: index % state.stalled.count)
        }
        waiter?.resume()
    }

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        state.withLock { $0.running += 1 }
        defer { state.withLock { $0.running -= 1 } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let stall = state.withLock { state -> Bool in
                guard state.stallNext else { return false }
                state.stallNext = false
                state.stalled.append(continuation)
                return true
            }
            if !stall { continuation.resume() }
        }
        return try await wrapped.set(items)
    }
}

/// Random interleavings of writes, stalls past every deadline, late returns and flushes: the provider never ends
/// holding a value older than the newest acknowledged write of its key.
@Suite struct LateWritePropertyTests {
    /// Runs `work` while moving the clock a deadline at a time, until it returns.
    private func driving<T: Sendable>(
        _ clock: ManualClock, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let task = Task { try await work() }
        let done = Mutex(false)
        let watcher = Task {
            _ = try? await task.value
            done.withLock { $0 = true }
        }
        while !done.withLock({ $0 }) {
            await Task.yield()
            if clock.sleeperCount > 0 { clock.advance(by: .seconds(5)) }
            try? await Task.sleep(for: .milliseconds(1))
        }
        _ = await watcher.value
        return try await task.value
    }

    @Test(arguments: Array(1...12) as [UInt64])
    func noStalledWriteLandsOverANewerOne(seed: UInt64) async throws {
        var random = SeededRandom(seed: seed)
        let clock = ManualClock()
        let backing = MemoryProvider(id: "p")
        let provider = StallingProvider(backing)
        let store = try makeStore([provider]) {
            $0.timeout = .seconds(5)
            $0.clock = clock
            $0.outbox = try! makeOutbox(Outbox.Limits(maxAttempts: 1000))
        }
        let keys = ["a", "b"]
        var acknowledged: [String: String] = [:]
        var log: [String] = []
        for step in 0..<40 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let key = keys.randomElement(using: &random)!
                let value = "\(key)\(step)"
                if Bool.random(using: &random) { provider.stallNext() }
                let result = try await driving(clock) { try await store.set(value, forKey: key) }
                if !result.stored.isEmpty || !result.queued.isEmpty { acknowledged[key] = value }
                log.append("set \(value) -> stored \(result.stored) queued \(result.queued)")
            case 5..<8:
                let index = Int.random(in: 0..<8, using: &random)
                log.append("release \(index) of \(provider.stalledCount)")
                provider.release(index)
            default:
                clock.advance(by: .seconds(3600))
                let flushed = try await driving(clock) { try await store.flushOutbox() }
                log.append("flush drained \(flushed.drained)")
            }
        }
        // Every stalled call returns, then the outbox drains.
        provider.stopStalling()
        while provider.stalledCount > 0 { provider.release(0) }
        try await waitUntil { provider.running == 0 }
        for _ in 0..<20 where !store.pendingWrites().isEmpty {
            clock.advance(by: .seconds(3600))
            _ = try await driving(clock) { try await store.flushOutbox() }
        }
        #expect(store.pendingWrites().isEmpty, "seed \(seed): \(log)")
        for (key, value) in acknowledged {
            let held = try await backing.get([key])[0].get()
            #expect(held == value, "seed \(seed): \(key) holds \(held ?? "nil"), last acknowledged \(value); \(log)")
        }
        store.close()
    }
}

@Suite(
    .enabled(if: StressSize.isEnabled, "a stress suite: CLOUDSYNC_STRESS=1 or full"))
struct LateWriteStressTests {
    @Test(arguments: Array(100...399) as [UInt64])
    func noStalledWriteLandsOverANewerOneOverManySeeds(seed: UInt64) async throws {
        try await LateWritePropertyTests().noStalledWriteLandsOverANewerOne(seed: seed)
    }
}
