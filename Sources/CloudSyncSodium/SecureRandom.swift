internal import CSodium

/// Random numbers from the operating system's secure source, through libsodium.
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            if let address = buffer.baseAddress { randombytes_buf(address, buffer.count) }
        }
        return bytes
    }

    /// A uniformly distributed number in `0..<upperBound`, without modulo bias.
    public static func uniform(_ upperBound: UInt32) -> UInt32 {
        Sodium.ensureInitialized()
        return randombytes_uniform(upperBound)
    }
}
