/// A pipeline's run lock while a command holds it: a `flock` on `run.lock` in a state directory, or an advisory lock
/// in a PostgreSQL schema.
public protocol HeldRunLock: Sendable {
    /// Gives the lock back; later calls do nothing.
    func release()
}
