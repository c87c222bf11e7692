import Synchronization

/// A value behind a lock, in a class so closures and tasks can share it (a `Mutex` itself cannot be copied).
package final class Protected<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    package init(_ value: Value) { mutex = Mutex(value) }

    package func withLock<Result: Sendable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        try mutex.withLock { (value: inout sending Value) throws(E) -> Result in try body(&value) }
    }
}
