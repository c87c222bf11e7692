import CloudSync
import CloudSyncFiles
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A file written piece by piece under ``OutputFile``'s rules, so a large one (an export of a million keys) never has
/// to be held whole in memory.
///
/// Writes are buffered (256 KB). A regular file appears at its path only at ``commit()``: until then the text goes to
/// a temporary file beside it, which ``abandon()`` (or releasing the stream uncommitted) removes, so a run that fails
/// half way leaves the previous file as it was. A device or a pipe is written as the pieces come.
public final class OutputFileStream {
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    private let temporary: String?
    private let target: String
    private let what: String
    private var buffer: [UInt8] = []
    private var finished = false
    private static let bufferSize = 256 * 1024

    /// Opens `path` for writing; `what` names the file in errors ("the export file").
    public init(_ path: String, mode: mode_t = 0o644, what: String) throws(CloudSyncError) {
        (descriptor, ownsDescriptor, temporary, target) = try OutputFile.open(path, mode: mode, what: what)
        self.what = what
        buffer.reserveCapacity(Self.bufferSize)
    }

    deinit { abandon() }

    /// Appends `text`.
    public func write(_ text: String) throws(CloudSyncError) {
        var text = text
        let failure = text.withUTF8 { bytes -> CloudSyncError? in
            do throws(CloudSyncError) {
                try write(bytes)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Appends `bytes`.
    public func write(_ bytes: UnsafeBufferPointer<UInt8>) throws(CloudSyncError) {
        if buffer.count + bytes.count > Self.bufferSize { try flush() }
        if bytes.count >= Self.bufferSize {
            try writeOut(bytes)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    /// Appends `bytes`.
    public func write(_ bytes: [UInt8]) throws(CloudSyncError) {
        try bytes.withUnsafeBufferPointer { pointer throws(CloudSyncError) in try write(pointer) }
    }

    /// Writes what is buffered, makes it durable and puts the file at its path (renaming the temporary file over it).
    public func commit() throws(CloudSyncError) {
        guard !finished else { return }
        try flush()
        guard let temporary else {
            finished = true
            if ownsDescriptor { close(descriptor) }
            return
        }
        finished = true
        do throws(NewFile.Failure) {
            try ReplacedFile.commit(temporary, syncing: descriptor, over: target)
        } catch {
            throw OutputFile.failure(what, target, error.code)
        }
    }

    /// Gives the file up: the temporary file is removed and the path keeps what it held.
    ///
    /// Nothing happens after ``commit()``.
    public func abandon() {
        guard !finished else { return }
        finished = true
        if ownsDescriptor { close(descriptor) }
        if let temporary { unlink(temporary) }
    }

    private func flush() throws(CloudSyncError) {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBufferPointer { bytes throws(CloudSyncError) in try writeOut(bytes) }
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeOut(_ bytes: UnsafeBufferPointer<UInt8>) throws(CloudSyncError) {
        var offset = 0
        while offset < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw OutputFile.failure(what, target, errno)
            }
            offset += count
        }
    }
}
