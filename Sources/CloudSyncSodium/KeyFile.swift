internal import CSodium
import CloudSyncFiles

#if canImport(Glibc)
    import Glibc
#endif

/// Key files: one line of standard base64 (with padding) holding the key bytes, then a newline; mode 0600.
extension SecretBytes {
    /// Files larger than this cannot be key files; refusing them early keeps a mistaken path from being slurped.
    static let keyFileMaximumSize = 4096

    /// Reads a key file and checks that it holds exactly `byteCount` bytes.
    public static func load(keyFile path: String, byteCount: Int = XChaCha20Poly1305.keyByteCount)
        throws(SodiumError) -> SecretBytes
    {
        Sodium.ensureInitialized()
        var contents = try readSmallFile(path, what: "key file")
        defer { contents.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) } }
        let result = contents.withUnsafeBytes { bytes in
            // The buffer holds one spare byte so its base address is never nil.
            Result { () throws(SodiumError) in
                try decodeBase64Key(
                    UnsafeRawBufferPointer(rebasing: bytes.dropLast()), byteCount: byteCount, origin: "key file \(path)"
                )
            }
        }
        return try result.get()
    }

    /// Reads a key given as base64 in an environment variable (a trailing newline is allowed).
    public static func load(environmentVariable name: String, byteCount: Int = XChaCha20Poly1305.keyByteCount)
        throws(SodiumError) -> SecretBytes
    {
        Sodium.ensureInitialized()
        guard let value = getenv(name) else {
            throw SodiumError(.keyFileIO, "environment variable \(name) is not set; it should hold a base64 key")
        }
        return try decodeBase64Key(
            UnsafeRawBufferPointer(start: value, count: strlen(value)), byteCount: byteCount,
            origin: "environment variable \(name)")
    }

    /// Decodes a key given as base64 text (a trailing newline allowed); `origin` names where it came from in errors.
    public static func load(base64Key text: String, origin: String, byteCount: Int = XChaCha20Poly1305.keyByteCount)
        throws(SodiumError) -> SecretBytes
    {
        Sodium.ensureInitialized()
        var text = text
        let result = text.withUTF8 { bytes in
            Result { () throws(SodiumError) in
                try decodeBase64Key(UnsafeRawBufferPointer(bytes), byteCount: byteCount, origin: origin)
            }
        }
        return try result.get()
    }

    /// A passphrase from an environment variable, taken byte for byte (the variable's own copy cannot be wiped).
    public static func passphrase(environmentVariable name: String) throws(SodiumError) -> SecretBytes {
        guard let value = getenv(name) else {
            throw SodiumError(.keyFileIO, "environment variable \(name) is not set; it should hold the passphrase")
        }
        let passphrase = SecretBytes(copying: UnsafeRawBufferPointer(start: value, count: strlen(value)))
        guard passphrase.count > 0 else {
            throw SodiumError(.keyFileMalformed, "environment variable \(name) holds an empty passphrase")
        }
        return passphrase
    }

    /// A passphrase from a file: its bytes without one trailing newline.
    public static func passphrase(file path: String) throws(SodiumError) -> SecretBytes {
        var contents = try readSmallFile(path, what: "passphrase file")
        defer { contents.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) } }
        var length = contents.count - 1
        if length > 0, contents[length - 1] == UInt8(ascii: "\n") { length -= 1 }
        if length > 0, contents[length - 1] == UInt8(ascii: "\r") { length -= 1 }
        guard length > 0 else { throw SodiumError(.keyFileMalformed, "passphrase file \(path) is empty") }
        return contents.withUnsafeBytes { SecretBytes(copying: $0.prefix(length)) }
    }

    /// Decodes one line of standard base64 (a trailing newline allowed) into exactly `byteCount` secret bytes.
    static func decodeBase64Key(_ text: UnsafeRawBufferPointer, byteCount: Int, origin: String)
        throws(SodiumError) -> SecretBytes
    {
        var length = text.count
        if length > 0, text[length - 1] == UInt8(ascii: "\n") { length -= 1 }
        if length > 0, text[length - 1] == UInt8(ascii: "\r") { length -= 1 }
        let hint = "expected one line of base64 holding \(byteCount) bytes, as `cloudsync keygen` writes"
        guard length > 0 else { throw SodiumError(.keyFileMalformed, "\(origin) is empty; \(hint)") }
        // libsodium reads the characters as signed `char` and takes bytes above 127 for letters: a damaged file would
        // load as another key. Every byte is looked at, whatever it holds, as the decoder does.
        var high: UInt8 = 0
        for index in 0..<length { high |= text[index] }
        guard high & 0x80 == 0 else {
            throw SodiumError(.keyFileMalformed, "\(origin) is not valid base64 (a byte above 127); \(hint)")
        }

        var decodedCount = 0
        var status: Int32 = 0
        // Large enough for any base64 of this length, so a long key reports its length rather than failing to fit.
        let decoded = SecretBytes(count: length / 4 * 3 + 3) { output in
            status = sodium_base642bin(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, text.sodiumText,
                length, nil, &decodedCount, nil, sodium_base64_VARIANT_ORIGINAL)
        }
        guard status == 0 else {
            throw SodiumError(.keyFileMalformed, "\(origin) is not valid base64; \(hint)")
        }
        guard decodedCount == byteCount else {
            throw SodiumError(
                .keyFileWrongLength, "\(origin) holds \(decodedCount) bytes, but a key must be \(byteCount) bytes")
        }
        return decoded.withUnsafeBytes { SecretBytes(copying: $0.prefix(decodedCount)) }
    }

    /// Writes the bytes as a key file with mode 0600.
    ///
    /// Refuses to replace an existing file: losing a key loses
    /// everything encrypted with it. The file appears whole or not at all.
    public func save(keyFile path: String) throws(SodiumError) {
        Sodium.ensureInitialized()
        let encodedLength = sodium_base64_encoded_len(count, sodium_base64_VARIANT_ORIGINAL)
        var line = [UInt8](repeating: 0, count: encodedLength + 1)
        defer { line.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) } }
        withUnsafeBytes { key in
            line.withUnsafeMutableBytes { output in
                _ = sodium_bin2base64(
                    output.baseAddress!.assumingMemoryBound(to: CChar.self), encodedLength, key.sodiumInput,
                    key.count, sodium_base64_VARIANT_ORIGINAL)
            }
        }
        // encodedLength counts the C string's terminator; it becomes the newline.
        line[encodedLength - 1] = UInt8(ascii: "\n")
        try Self.writeNewFile(path, contents: line.prefix(encodedLength))
    }

    /// Writes `contents` into the device or FIFO at `path` as it is.
    private static func writeInPlace(_ path: String, contents: ArraySlice<UInt8>) throws(SodiumError) {
        let descriptor = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ioError("write", path, errno) }
        defer { close(descriptor) }
        let failure = contents.withUnsafeBytes { NewFile.writeAll($0, to: descriptor) }
        guard failure == 0 else { throw ioError("write", path, failure) }
    }

    private static func ioError(_ action: String, _ path: String, _ code: Int32, what: String = "key file")
        -> SodiumError
    {
        SodiumError(.keyFileIO, "cannot \(action) \(what) \(path): \(String(cString: strerror(code)))")
    }

    /// The file's bytes plus one trailing spare byte.
    private static func readSmallFile(_ path: String, what: String) throws(SodiumError) -> [UInt8] {
        // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; anything but a regular file is refused.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { throw ioError("read", path, errno, what: what) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw ioError("read", path, errno, what: what) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw SodiumError(
                .keyFileIO,
                "\(what) \(path) is not a regular file; name the file that holds the \(what == "key file" ? "key" : "passphrase")"
            )
        }
        var buffer = [UInt8](repeating: 0, count: keyFileMaximumSize + 1)
        var filled = 0
        while filled < buffer.count {
            let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if got < 0 {
                if errno == EINTR { continue }
                let failure = errno
                buffer.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) }
                throw ioError("read", path, failure, what: what)
            }
            if got == 0 { break }
            filled += got
        }
        guard filled <= keyFileMaximumSize else {
            buffer.withUnsafeMutableBytes { sodium_memzero($0.baseAddress!, $0.count) }
            throw SodiumError(
                .keyFileMalformed, "\(what) \(path) is larger than \(keyFileMaximumSize) bytes; it is not a \(what)")
        }
        // Shrinking in place keeps the one buffer, so no unzeroed copy of the key is left behind.
        buffer.removeSubrange((filled + 1)...)
        return buffer
    }

    private static func writeNewFile(_ path: String, contents: ArraySlice<UInt8>) throws(SodiumError) {
        var existing = stat()
        if stat(path, &existing) == 0 {
            switch existing.st_mode & S_IFMT {
            case S_IFCHR, S_IFIFO:
                // A pipe, a terminal or /dev/null (`--out /dev/stdout | vault write …`): written in place, never
                // replaced (a rename over /dev/null, as root, would replace it for the whole machine).
                try writeInPlace(path, contents: contents)
                return
            case S_IFDIR:
                throw SodiumError(
                    .keyFileIO, "cannot create key file \(path): it is a directory; give the path of a new file in it")
            default:
                break
            }
        }
        let failure = contents.withUnsafeBytes { bytes -> NewFile.Failure? in
            do throws(NewFile.Failure) {
                try NewFile.create(path, bytes: bytes, mode: 0o600)
                return nil
            } catch {
                return error
            }
        }
        if let error = failure {
            // The name is linked only when nothing holds it, so an existing key is never replaced, even by a racing
            // writer.
            if error.code == EEXIST {
                throw SodiumError(
                    .keyFileExists, "key file \(path) already exists; refusing to overwrite a key, move it away first")
            }
            throw ioError(error.writing ? "write" : "create", path, error.code)
        }
    }
}
