import CloudSync

/// Raised when the run's task is cancelled; jobs look at it between batches.
package final class InterruptFlag: Sendable {
    private let raised = Protected(false)
    package init() {}
    package func raise() { raised.withLock { $0 = true } }
    package var isRaised: Bool { raised.withLock { $0 } }
}
