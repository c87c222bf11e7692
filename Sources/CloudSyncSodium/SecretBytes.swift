internal import CSodium

/// Secret bytes — a key or a passphrase — that are zeroed when released and never printed.
///
/// Compares in constant time. `description`, `debugDescription` and reflection all show `<redacted>`.
public final class SecretBytes: @unchecked Sendable {
    // Written only during init and zeroed in deinit: immutable in between, so sharing it is safe.
    // At least one byte is allocated, so the base address is never nil even for an empty secret.
    private let base: UnsafeMutableRawPointer
    /// The number of secret bytes (may be 0); not itself secret.
    public let count: Int

    /// Allocates `count` bytes and lets `initializer` fill them.
    public init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        precondition(count >= 0, "negative byte count")
        Sodium.ensureInitialized()
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        base.initializeMemory(as: UInt8.self, repeating: 0, count: max(count, 1))
        self.count = count
        // Best effort: keep the bytes out of swap. Failure (RLIMIT_MEMLOCK) leaves them usable.
        _ = sodium_mlock(base, max(count, 1))
        // Every stored property is set, so if this throws, deinit runs and wipes the storage.
        try initializer(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Copies `bytes`.
    ///
    /// The caller still owns, and should zero, its own copy.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { buffer in
            _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        }
    }

    /// Takes the bytes of `bytes` and zeroes the array.
    public convenience init(zeroing bytes: inout [UInt8]) {
        self.init(copying: bytes)
        bytes.withUnsafeMutableBytes { buffer in
            if let address = buffer.baseAddress { sodium_memzero(address, buffer.count) }
        }
    }

    /// Takes the UTF-8 bytes of a passphrase.
    public convenience init(utf8 text: String) {
        self.init(copying: Array(text.utf8))
    }

    /// `count` bytes from the operating system's secure random source.
    public static func random(count: Int) -> SecretBytes {
        SecretBytes(count: count) { buffer in
            if let address = buffer.baseAddress { randombytes_buf(address, buffer.count) }
        }
    }

    deinit {
        // sodium_munlock zeroes the bytes before unlocking them; zero explicitly in case locking had failed.
        sodium_memzero(base, max(count, 1))
        _ = sodium_munlock(base, max(count, 1))
        base.deallocate()
    }

    /// Lends the bytes to `body`.
    ///
    /// Do not let them escape it.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }
}

extension SecretBytes: Equatable {
    /// Constant-time comparison: how long it takes does not depend on where the bytes differ.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in sodium_memcmp(left.sodiumInput, right.sodiumInput, left.count) == 0 }
        }
    }
}

extension SecretBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Always `<redacted>`, so a secret never reaches a log through string interpolation.
    public var description: String { "<redacted>" }
    /// Always `<redacted>`, so a secret never reaches a log through `debugPrint` or a debugger.
    public var debugDescription: String { "<redacted>" }
    /// A mirror with no children, so `dump` and reflection show nothing of the bytes.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .class) }
}

/// Constant-time equality of two byte strings of public length, such as MACs.
public func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    Sodium.ensureInitialized()
    guard lhs.count == rhs.count else { return false }
    return sodium_memcmp(lhs, rhs, lhs.count) == 0
}
