/// Handlers of one kind of event, each removed by cancelling the subscription it was given.
package final class Subscribers<Event: Sendable>: Sendable {
    private let state = Protected<(handlers: [Int: @Sendable (Event) -> Void], next: Int)>(([:], 0))

    package init() {}

    package func add(_ handler: @escaping @Sendable (Event) -> Void) -> ProviderSubscription {
        let id = state.withLock { state in
            defer { state.next += 1 }
            state.handlers[state.next] = handler
            return state.next
        }
        return ProviderSubscription { [weak self] in self?.state.withLock { _ = $0.handlers.removeValue(forKey: id) } }
    }

    /// Calls every handler, outside the lock, so a handler may subscribe or cancel.
    package func notify(_ event: Event) {
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(event) }
    }

    package func removeAll() { state.withLock { $0.handlers = [:] } }
}
