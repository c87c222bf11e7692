import Synchronization

/// Random spread for retry waits, in 0...1.
///
/// Jitter only has to keep many clients from retrying in step, which needs no cryptographic randomness; the system
/// generator makes a system call per number, which the outbox would pay for every queued write. This is SplitMix64
/// over one process-wide state, seeded once from the system generator.
@usableFromInline package enum Jitter {
    private static let state = Mutex<UInt64>(UInt64.random(in: .min ... .max))

    /// A number in 0..<1, uniformly spread.
    @usableFromInline package static func next() -> Double {
        let bits = state.withLock { state -> UInt64 in
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
        return Double(bits >> 11) / Double(UInt64(1) << 53)
    }
}
