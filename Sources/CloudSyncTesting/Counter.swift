import Synchronization

/// A count shared by concurrent callers: test bodies that must be `@Sendable` count calls or number fixtures with it.
public final class Counter: Sendable {
    private let count = Mutex(0)

    /// A counter at 0.
    public init() {}

    /// Returns the current count and adds one (0, 1, 2, ...).
    @discardableResult
    public func next() -> Int {
        count.withLock { count in
            defer { count += 1 }
            return count
        }
    }

    /// The current count, without changing it.
    public var value: Int { count.withLock { $0 } }
}
