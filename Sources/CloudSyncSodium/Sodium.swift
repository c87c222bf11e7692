internal import CSodium

/// libsodium's one-time set-up.
///
/// Every entry point of this module calls ``ensureInitialized()`` first.
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    static func ensureInitialized() {
        // sodium_init fails only when the system has no usable random source; nothing here could work then.
        precondition(initialized, "libsodium could not be initialised: no usable source of randomness")
    }
}

/// An error from a cryptographic operation or a key file.
///
/// Its description never holds key bytes.
public struct SodiumError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for callers to branch on.
    public enum Code: String, Sendable {
        /// A ciphertext did not authenticate: wrong key, wrong associated data, or modified bytes.
        case authenticationFailed
        /// A key, nonce, salt or output length outside what the algorithm accepts.
        case invalidArgument
        /// Key derivation could not run, usually because the memory limit could not be allocated.
        case derivationFailed
        /// A key file could not be read or written.
        case keyFileIO
        /// A key file did not hold one line of base64.
        case keyFileMalformed
        /// A key file decoded to the wrong number of bytes.
        case keyFileWrongLength
        /// A key file already exists where a new one was to be written.
        case keyFileExists
    }

    /// What went wrong, for callers to branch on.
    public let code: Code
    /// What went wrong and what to do, for people; never key bytes.
    public let message: String

    /// An error with `code` and `message`; the message must not hold key bytes.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// One byte that is never written, lent to libsodium where it demands a non-null pointer for empty input.
nonisolated(unsafe) private let emptyInput: UnsafeMutablePointer<UInt8> = {
    let byte = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    byte.initialize(to: 0)
    return byte
}()

extension UnsafeRawBufferPointer {
    /// The bytes as libsodium wants them: its headers declare pointers non-null even for zero-length input.
    var sodiumInput: UnsafePointer<UInt8> {
        baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(emptyInput)
    }

    var sodiumText: UnsafePointer<CChar> {
        UnsafeRawPointer(sodiumInput).assumingMemoryBound(to: CChar.self)
    }
}
