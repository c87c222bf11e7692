import Synchronization

/// Random spread for retry waits, in 0...1.
///
/// Jitter only has to keep many clients from retrying in step, which needs no cryptographic randomness; the system
/// generator makes a system call per number, which the outbox would pay for every queued write. This is one
/// ``SeededRandom`` stream for the process, seeded once from the system generator.
@usableFromInline package enum Jitter {
    private static let stream = Mutex(SeededRandom(seed: UInt64.random(in: .min ... .max)))

    /// A number in 0..<1, uniformly spread.
    @usableFromInline package static func next() -> Double {
        stream.withLock { $0.nextUnit() }
    }
}
