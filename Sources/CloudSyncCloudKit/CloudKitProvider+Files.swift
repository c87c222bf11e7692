import CloudSync
import Foundation

/// Files under keys: the key's record holds the file as an asset in its ``fileField``, uploaded from the file and
/// downloaded into one; at most 50 MB (`CloudKitBridge.maxAssetBytes`).
///
/// A record holding a value (a STRING in ``field``) reads as a file of the value's UTF-8 bytes, so every key's bytes
/// can be fetched to a path, as on the providers that keep values in files.
extension CloudKitProvider: FileStoringProvider {
    /// CloudKit's limit for one Asset field: 50 MB.
    public var maxFileBytes: Int64? { CloudKitBridge.maxAssetBytes }

    /// Uploads the file (`assets/upload`, then the bytes to the URL it gives), then saves the key's record with
    /// `forceReplace` and the asset in ``fileField``, replacing a value or an earlier file.
    public func putFile(_ key: String, from source: String, size: Int64) async throws {
        try ensureWritable()
        guard size <= CloudKitBridge.maxAssetBytes else {
            throw CloudSyncError(
                .payloadTooLarge,
                "\(source) is \(size) bytes; a CloudKit asset holds at most \(CloudKitBridge.maxAssetBytes) bytes "
                    + "(50 MB): split the file, or store it on a provider with a larger limit",
                provider: id, key: key)
        }
        let results: [Result<CloudKitRecord?, CloudKitError>]
        do {
            results = try await inZone(creating: true) { () async throws(CloudKitError) in
                let asset = try await self.bridge.uploadAsset(
                    fileAt: source, recordName: key, recordType: self.recordType, fieldName: self.fileField)
                let record = CloudKitRecord(
                    recordName: key, recordType: self.recordType, fields: [self.fileField: .asset(asset)])
                return try await self.bridge.modify([CloudKitOperation(.forceReplace, record)])
            }
        } catch {
            throw map(error, key: key)
        }
        if case .failure(let error)? = results.first { throw map(error, key: key) }
    }

    /// The asset's size, or the value's UTF-8 size; nil when the key has no record.
    public func fileSize(_ key: String) async throws -> Int64? {
        guard let record = try await record(key) else { return nil }
        if let asset = record.fields[fileField]?.assetValue {
            guard let size = asset.size else {
                throw CloudSyncError(
                    .provider, "CloudKit answered the asset of \(key) without its size", provider: id, key: key)
            }
            return size
        }
        if case .string(let value) = record.fields[field] { return Int64(value.utf8.count) }
        throw notAFile(key, record)
    }

    /// Downloads the asset into `destination` (or writes the value's bytes); false when the key has no record.
    public func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        guard let record = try await record(key) else { return false }
        if let asset = record.fields[fileField]?.assetValue {
            do {
                try await bridge.downloadAsset(asset, to: destination)
            } catch {
                throw map(error, key: key)
            }
            return true
        }
        if case .string(let value) = record.fields[field] {
            try Data(value.utf8).write(to: URL(fileURLWithPath: destination))
            return true
        }
        throw notAFile(key, record)
    }

    /// The key's record (`records/lookup`); nil when there is none, or no zone yet.
    private func record(_ key: String) async throws(CloudSyncError) -> CloudKitRecord? {
        try ensureOpen()
        do {
            let found = try await inZone(creating: false) { () async throws(CloudKitError) in
                try await self.bridge.lookup([key])
            }
            return try found.first?.get()
        } catch let error where error.code == .zoneNotFound {
            return nil
        } catch {
            throw map(error, key: key)
        }
    }

    private func notAFile(_ key: String, _ record: CloudKitRecord) -> CloudSyncError {
        CloudSyncError(
            .decode,
            "the record \(key) in the \(zoneDescription) has neither an asset in `\(fileField)` nor a STRING in "
                + "`\(field)` (its type is \(record.recordType)); it was not written by CloudSync",
            provider: id, key: key)
    }
}
