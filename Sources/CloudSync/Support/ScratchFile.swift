import CloudSyncFiles

#if canImport(Glibc)
    import Glibc
#endif

/// A private temporary file (mode 0600, in `TMPDIR` or `/tmp`) that carries bytes to or from a provider's file API,
/// removed when the caller is done with it.
package struct ScratchFile: Sendable {
    /// Where it is.
    package let path: String

    /// A new, empty scratch file; `ERR_CONFIG` naming the directory when none can be made there.
    package init() throws(CloudSyncError) {
        let directory = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((directory + "/cloudsync-scratch-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            let code = errno
            throw CloudSyncError(
                .config,
                "cannot make a temporary file in \(directory): \(describe(errno: code, path: directory)); set TMPDIR "
                    + "to a writable directory")
        }
        close(descriptor)
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// A scratch file holding `bytes`.
    package init(holding bytes: [UInt8]) throws(CloudSyncError) {
        try self.init()
        do throws(CloudSyncError) {
            try append(bytes[...])
        } catch {
            remove()
            throw error
        }
    }

    /// Adds `bytes` at its end.
    package func append(_ bytes: ArraySlice<UInt8>) throws(CloudSyncError) {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        let code = descriptor < 0 ? errno : bytes.withUnsafeBytes { NewFile.writeAll($0, to: descriptor) }
        if descriptor >= 0 { close(descriptor) }
        guard code == 0 else {
            throw CloudSyncError(
                code == ENOSPC || code == EDQUOT ? .quotaExceeded : .config,
                "cannot write a temporary file at \(path): \(describe(errno: code, path: path)); free space there, or "
                    + "set TMPDIR to a directory with room")
        }
    }

    /// Its bytes, at most `maxBytes` of them; `ERR_PAYLOAD_TOO_LARGE` when it holds more.
    package func bytes(maxBytes: Int) throws(CloudSyncError) -> [UInt8] {
        do throws(RegularFile.Failure) {
            return [UInt8](try RegularFile.read(path, maximumBytes: maxBytes))
        } catch {
            throw CloudSyncError(
                error.size == nil ? .config : .payloadTooLarge, "the temporary file \(path) \(error.reason)")
        }
    }

    /// Removes it.
    package func remove() { unlink(path) }
}
