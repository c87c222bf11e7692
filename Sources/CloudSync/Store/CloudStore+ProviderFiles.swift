extension CloudStore {
    /// Whether one provider stores files as they are: it has a file API (``FileStoringProvider``) and no codec, so
    /// bytes put there come back as they were, whatever they hold.
    public func storesFiles(_ providerID: String) throws(CloudSyncError) -> Bool {
        let provider = try provider(withID: providerID)
        return provider is any FileStoringProvider && codec(for: provider) == nil
    }

    /// Stores `bytes` under `key` on one provider only, as a file (see ``storesFiles(_:)``); `ERR_UNSUPPORTED` when
    /// it stores none.
    ///
    /// The bytes go through a private temporary file, so the provider's streamed upload sends them; nothing is
    /// queued in the outbox.
    public func putBytes(_ bytes: [UInt8], as key: String, to providerID: String) async throws(CloudSyncError) {
        let file = try ScratchFile(holding: bytes)
        defer { file.remove() }
        try await putFile(key, from: file.path, to: providerID)
    }

    /// Stores the regular file at `path` under `key` on one provider only, streamed; `ERR_UNSUPPORTED` when it stores
    /// no files, `ERR_PAYLOAD_TOO_LARGE` when the file is larger than it takes.
    public func putFile(_ key: String, from path: String, to providerID: String) async throws(CloudSyncError) {
        let provider = try fileProvider(providerID, key: key)
        try validate(key, providers: [provider])
        let size = try SourceFile.size(of: path, key: key)
        if let limit = provider.maxFileBytes, size > limit {
            throw CloudSyncError(
                .payloadTooLarge,
                "\(path) is \(size) bytes, more than \(providerID) takes in one file (\(limit)); keep it in a provider "
                    + "with a larger limit", provider: providerID, key: key)
        }
        try await withWriteLock([key].keySet()) { inFlight async throws(CloudSyncError) in
            guard !inFlight.contains(OutboxPair(key: key, provider: providerID)) else {
                throw Self.heldBehindEarlierWrite(key: key, provider: providerID, file: true)
            }
            try await fileDispatcher(for: provider, size: size).call(key: key, writing: [key]) {
                try await ($0 as! any FileStoringProvider).putFile(key, from: path, size: size)
            }
        }
    }

    /// The bytes `key` holds on one provider, read through its file API (a value reads as its UTF-8 bytes); nil when
    /// it holds nothing.
    ///
    /// Bounded: when the provider says the key holds more than `maxBytes`, nothing is downloaded and the read is
    /// `ERR_PAYLOAD_TOO_LARGE` naming the key; the bytes downloaded are held to the bound too.
    public func getBytes(_ key: String, from providerID: String, maxBytes: Int) async throws(CloudSyncError)
        -> [UInt8]?
    {
        let file = try ScratchFile()
        defer { file.remove() }
        guard let size = try await getFile(key, from: providerID, to: file.path, maxBytes: Int64(maxBytes)) else {
            return nil
        }
        do throws(CloudSyncError) {
            return try file.bytes(maxBytes: maxBytes)
        } catch  where error.code == .payloadTooLarge {
            throw Self.tooLarge(key, providerID, size: size, maxBytes: Int64(maxBytes))
        }
    }

    /// Writes the bytes `key` holds on one provider into the file at `path`, streamed; its size.
    ///
    /// The file's bytes are replaced. Nil, leaving the file as it was, when the key holds nothing;
    /// `ERR_PAYLOAD_TOO_LARGE`, before anything is downloaded, when it holds more than `maxBytes`.
    @discardableResult
    public func getFile(_ key: String, from providerID: String, to path: String, maxBytes: Int64 = .max)
        async throws(CloudSyncError) -> Int64?
    {
        let provider = try fileProvider(providerID, key: key)
        let size = try await dispatcher(for: provider).call(key: key) {
            try await ($0 as! any FileStoringProvider).fileSize(key)
        }
        guard let size else { return nil }
        guard size <= maxBytes else { throw Self.tooLarge(key, providerID, size: size, maxBytes: maxBytes) }
        let found = try await fileDispatcher(for: provider, size: size).call(key: key) {
            try await ($0 as! any FileStoringProvider).getFile(key, to: path, size: size)
        }
        return found ? size : nil
    }

    /// The bytes `key` takes as stored on one provider, asked of its file API (no bytes are read); nil when it holds
    /// nothing.
    public func fileSize(_ key: String, on providerID: String) async throws(CloudSyncError) -> Int64? {
        let provider = try fileProvider(providerID, key: key)
        return try await dispatcher(for: provider).call(key: key) {
            try await ($0 as! any FileStoringProvider).fileSize(key)
        }
    }

    /// The provider `providerID` as a file store; `ERR_UNSUPPORTED` when it stores no files as they are.
    private func fileProvider(_ providerID: String, key: String) throws(CloudSyncError) -> any FileStoringProvider {
        let provider = try provider(withID: providerID)
        guard let files = provider as? any FileStoringProvider, codec(for: provider) == nil else {
            throw CloudSyncError(
                .unsupported,
                provider is any FileStoringProvider
                    ? "\(providerID) has a codec, and files are stored as they are; read and write its values instead"
                    : "\(providerID) stores values, not files", provider: providerID, key: key)
        }
        return files
    }

    private static func tooLarge(_ key: String, _ providerID: String, size: Int64, maxBytes: Int64) -> CloudSyncError {
        CloudSyncError(
            .payloadTooLarge,
            "\(key) in \(providerID) holds \(size) bytes, more than the \(maxBytes) this read takes",
            provider: providerID, key: key)
    }
}
