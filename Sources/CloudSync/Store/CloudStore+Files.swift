#if canImport(Glibc)
    import Glibc
#endif

/// What ``CloudStore/putFile(_:from:)`` or ``CloudStore/getFile(_:to:)`` moved.
public struct FileReceipt: Sendable, Equatable {
    /// The key the file is stored under.
    public var key: String
    /// Its size in bytes.
    public var size: Int64
    /// The providers that now hold it (a put), or the one it was read from (a get).
    public var providers: [String]
    /// File providers passed over because the file is larger than they take.
    public var skippedTooLarge: [String]
    /// File providers passed over by a failover put because they were unavailable: they may still hold an older
    /// file under the key, which a later get would find first once they are back; remove it there then.
    public var mayHoldOlder: [String]

    /// A receipt, for comparing in tests and building in wrappers.
    public init(
        key: String, size: Int64, providers: [String], skippedTooLarge: [String] = [], mayHoldOlder: [String] = []
    ) {
        self.key = key
        self.size = size
        self.providers = providers
        self.skippedTooLarge = skippedTooLarge
        self.mayHoldOlder = mayHoldOlder
    }
}

extension CloudStore {
    /// How many bytes a file transfer must move per ``StoreOptions/timeout``: its deadline is one timeout per MiB
    /// started, so a large file gets time in proportion and a stalled one is still cut off.
    public static let fileBytesPerTimeout: Int64 = 1 << 20

    /// Stores the bytes of the regular file at `path` under `key`, streamed, on the providers that store files
    /// natively (``FileStoringProvider``); files are not tiered with values.
    ///
    /// In failover mode the file goes to the first available file provider that takes its size; in mirror mode to
    /// every one, succeeding when at least one stored it (the others are reported to ``StoreOptions/onError``).
    /// Nothing is queued in the outbox: a file could change before a retry, so a failure is the caller's to see.
    ///
    /// Files are stored as they are: a provider with a codec takes no files, since the codec encodes values, not
    /// files (encrypt the file first). Errors: `ERR_CONFIG` for a source that is missing or not a regular file,
    /// `ERR_UNSUPPORTED` when no configured provider stores files, `ERR_PAYLOAD_TOO_LARGE` naming the limits when
    /// none takes the size, `ERR_NO_PROVIDER` when none is available, else the provider's error.
    @discardableResult
    public func putFile(_ key: String, from path: String) async throws(CloudSyncError) -> FileReceipt {
        let configured = try configuredProviders()
        try validate(key, providers: configured)
        let size = try SourceFile.size(of: path, key: key)
        let candidates = try fileProviders(configured, key: key)
        let fitting = candidates.filter { $0.maxFileBytes.map { size <= $0 } ?? true }
        let tooSmall = candidates.filter { $0.maxFileBytes.map { size > $0 } ?? false }
        guard !fitting.isEmpty else {
            let limits = tooSmall.map { "\($0.id) takes \($0.maxFileBytes ?? 0)" }.joined(separator: ", ")
            throw CloudSyncError(
                .payloadTooLarge,
                "\(path) is \(size) bytes, more than any file provider takes (\(limits)); split the file, or add a "
                    + "provider that takes files of this size",
                provider: tooSmall.first?.id, key: key)
        }
        let (available, answers) = await availableWithReasons(fitting)
        guard let first = available.first else { throw noProviderError(fitting, answers: answers) }
        let targets = options.writeMode == .mirror ? available : [first]
        let passedOver = fitting.prefix { $0.id != first.id }.map(\.id)

        let locked = [key].keySet()
        return try await withWriteLock(locked) { inFlight async throws(CloudSyncError) -> FileReceipt in
            var stored: [String] = []
            var failures: [CloudSyncError] = []
            for provider in targets {
                // An earlier write of the key that still runs there could land over the file: it is not sent.
                guard !inFlight.contains(OutboxPair(key: key, provider: provider.id)) else {
                    failures.append(Self.heldBehindEarlierWrite(key: key, provider: provider.id, file: true))
                    continue
                }
                do throws(CloudSyncError) {
                    try await fileDispatcher(for: provider, size: size).call(key: key, writing: [key]) {
                        try await ($0 as! any FileStoringProvider).putFile(key, from: path, size: size)
                    }
                    stored.append(provider.id)
                } catch {
                    failures.append(error)
                }
            }
            guard !stored.isEmpty else { throw failures[0] }
            for failure in failures { report(failure) }
            return FileReceipt(
                key: key, size: size, providers: stored, skippedTooLarge: tooSmall.map(\.id),
                mayHoldOlder: options.writeMode == .mirror ? [] : passedOver)
        }
    }

    /// Writes the file stored under `key` to `path`, from the first available file provider that holds it; nil,
    /// leaving `path` untouched, when none does.
    ///
    /// The bytes go to a temporary file beside `path`, made durable, then renamed over it, so `path` holds the old
    /// file or the whole new one, never part of one. A symlink to a regular file keeps being a link (the file it
    /// points to is replaced); a replaced file keeps its permissions, a new one gets 0644. A directory, a device or
    /// a pipe at `path` is refused with `ERR_CONFIG` before anything is read: renaming over one would replace it.
    ///
    /// A provider that fails is reported to ``StoreOptions/onError`` and the read falls through to the next; when
    /// none holds the file and one failed, its error is thrown, since the file may be there.
    public func getFile(_ key: String, to path: String) async throws(CloudSyncError) -> FileReceipt? {
        let configured = try configuredProviders()
        try validate(key, providers: configured)
        let destination = try FileDestination(path, key: key)
        let candidates = try fileProviders(configured, key: key)
        let (available, answers) = await availableWithReasons(candidates)
        guard !available.isEmpty else { throw noProviderError(candidates, answers: answers) }
        var firstFailure: CloudSyncError?
        for provider in available {
            do throws(CloudSyncError) {
                let size = try await dispatcher(for: provider).call(key: key) {
                    try await ($0 as! any FileStoringProvider).fileSize(key)
                }
                guard let size else { continue }
                let staged = try destination.stage()
                let found: Bool
                do throws(CloudSyncError) {
                    found = try await fileDispatcher(for: provider, size: size).call(key: key) {
                        try await ($0 as! any FileStoringProvider).getFile(key, to: staged, size: size)
                    }
                } catch {
                    destination.discard(staged)
                    throw error
                }
                guard found else {
                    // Removed between the two calls.
                    destination.discard(staged)
                    continue
                }
                let written = try destination.commit(staged)
                return FileReceipt(key: key, size: written, providers: [provider.id])
            } catch {
                // A bad destination is the caller's, not the provider's: no other provider would fare better.
                if error.provider == nil { throw error }
                report(error)
                if firstFailure == nil { firstFailure = error }
            }
        }
        if let firstFailure { throw firstFailure }
        return nil
    }

    /// The configured providers that store files and have no codec, in preference order; `ERR_UNSUPPORTED` saying
    /// why when there are none.
    private func fileProviders(_ configured: [any Provider], key: String) throws(CloudSyncError)
        -> [any FileStoringProvider]
    {
        let storing = configured.compactMap { $0 as? any FileStoringProvider }
        let plain = storing.filter { codec(for: $0) == nil }
        guard plain.isEmpty else { return plain }
        if storing.isEmpty {
            throw CloudSyncError(
                .unsupported,
                "none of the store's providers (\(configured.map(\.id).joined(separator: ", "))) stores files; "
                    + "configure a directory, s3, googleDrive or cloudKit provider",
                key: key)
        }
        throw CloudSyncError(
            .unsupported,
            "every file provider (\(storing.map(\.id).joined(separator: ", "))) has a codec, and files are stored as "
                + "they are; encrypt the file first, or add a file provider without a codec",
            key: key)
    }

    /// A dispatcher whose deadline is one ``StoreOptions/timeout`` per ``fileBytesPerTimeout`` of `size` started.
    func fileDispatcher(for provider: any Provider, size: Int64) -> BatchDispatcher {
        let rounds = max(1, Int((size + Self.fileBytesPerTimeout - 1) / Self.fileBytesPerTimeout))
        return BatchDispatcher(
            provider: provider, timeout: options.timeout.map { $0 * rounds }, clock: options.clock,
            abandoned: abandonedWrites)
    }
}
