/// Serialises work on the same keys: a write and an outbox flush of one key never overlap, so a retry cannot land
/// after a newer direct write.
final class KeyLocks: Sendable {
    private struct State {
        var held = Set<StoreKey>()
        var waiters: [(keys: Set<StoreKey>, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Protected(State())

    /// Waits until none of `keys` is held, then holds them all.
    func acquire(_ keys: Set<StoreKey>) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.held.isDisjoint(with: keys) else {
                    state.waiters.append((keys, continuation))
                    return false
                }
                // Alone (the usual case), the keys become the held set as they are, without hashing each again.
                if state.held.isEmpty { state.held = keys } else { state.held.formUnion(keys) }
                return true
            }
            if granted { continuation.resume() }
        }
    }

    /// Releases `keys` and lets every waiter whose keys are now all free proceed, in arrival order.
    func release(_ keys: Set<StoreKey>) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            // Held keys include `keys`: when they are all that is held, nothing is left.
            if state.held.count == keys.count { state.held = [] } else { state.held.subtract(keys) }
            var ready: [CheckedContinuation<Void, Never>] = []
            var waiting: [(keys: Set<StoreKey>, continuation: CheckedContinuation<Void, Never>)] = []
            for waiter in state.waiters {
                if state.held.isDisjoint(with: waiter.keys) {
                    state.held.formUnion(waiter.keys)
                    ready.append(waiter.continuation)
                } else {
                    waiting.append(waiter)
                }
            }
            state.waiters = waiting
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
}
