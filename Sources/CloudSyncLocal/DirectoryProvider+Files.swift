import CloudSync

#if canImport(Glibc)
    import Glibc
#endif

/// Files under keys: a key's file holds the file's bytes as they are, written and read a chunk at a time.
extension DirectoryProvider: FileStoringProvider {
    /// The file system's own limit, which the provider does not know: nil.
    public var maxFileBytes: Int64? { nil }

    /// Copies the file at `source` into `key`'s file.
    ///
    /// The bytes go to a temporary file beside it, made durable, then named, as values are written, so the key holds
    /// the old bytes or the new ones. `ERR_QUOTA_EXCEEDED` for a full disk.
    public func putFile(_ key: String, from source: String, size: Int64) async throws {
        try ensureOpen()
        let written = try await LocalFiles.offload { [self] () throws(CloudSyncError) -> Int64 in
            let input = open(source, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
            guard input >= 0 else { throw failure("read", source, errno, key: key) }
            defer { Glibc.close(input) }
            var info = stat()
            guard fstat(input, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                throw CloudSyncError(.config, "\(source) is not a regular file", provider: id, key: key)
            }
            var copied: Int64 = 0
            let staging = stage(key) { output in
                switch LocalFiles.copyAll(from: input, to: output) {
                case .success(let count):
                    copied = count
                    return 0
                case .failure(let error): return error.code
                }
            }
            let file: DirectoryStagedFile
            switch staging {
            case .success(let staged): file = staged
            case .failure(let error): throw error
            }
            defer {
                Glibc.close(file.descriptor)
                Glibc.close(file.directoryDescriptor)
            }
            guard fsync(file.descriptor) == 0 else {
                let code = errno
                if let temporary = file.temporary { unlinkat(file.directoryDescriptor, temporary, 0) }
                throw failure("write", file.temporary ?? file.target, code, key: key)
            }
            if let error = putInPlace(file) { throw error }
            LocalFiles.syncDirectories(file.touchedDirectories)
            return copied
        }
        metrics.recordRequest(bytesWritten: Int(written))
    }

    /// The size of `key`'s file; nil when it has none.
    public func fileSize(_ key: String) async throws -> Int64? {
        try ensureOpen()
        metrics.recordRequest()
        return try await LocalFiles.offload { [self] () throws(CloudSyncError) -> Int64? in
            switch openForReading(key) {
            case .failure(let error): throw error
            case .success(nil): return nil
            case .success(let file?):
                Glibc.close(file.descriptor)
                return Int64(file.info.st_size)
            }
        }
    }

    /// Copies `key`'s file into `destination`; false when the key has no file.
    public func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try ensureOpen()
        let copied = try await LocalFiles.offload { [self] () throws(CloudSyncError) -> Int64? in
            let file: (descriptor: Int32, path: String, info: stat)
            switch openForReading(key) {
            case .failure(let error): throw error
            case .success(nil): return nil
            case .success(let opened?): file = opened
            }
            defer { Glibc.close(file.descriptor) }
            let output = open(destination, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)
            guard output >= 0 else { throw failure("write", destination, errno, key: key) }
            defer { Glibc.close(output) }
            switch LocalFiles.copyAll(from: file.descriptor, to: output) {
            case .success(let count): return count
            case .failure(let error): throw failure("copy", file.path, error.code, key: key)
            }
        }
        metrics.recordRequest(bytesRead: Int(copied ?? 0))
        return copied != nil
    }
}
