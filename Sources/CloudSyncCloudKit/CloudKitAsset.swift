import Foundation

/// A file held by a record's Asset field: CloudKit's asset dictionary (api-facts B.4).
///
/// ``CloudKitBridge/uploadAsset(fileAt:recordName:recordType:fieldName:)`` returns one with a ``receipt``; put it in
/// the record's field (`.asset(asset)`) and save the record to claim the upload. Records read back carry it with a
/// ``downloadURL`` instead, which ``CloudKitBridge/downloadAsset(_:to:)`` fetches.
public struct CloudKitAsset: Sendable, Hashable {
    /// The file's checksum, as CloudKit computed it (opaque text).
    public var fileChecksum: String?
    /// The file's size in bytes.
    public var size: Int64?
    /// CloudKit's checksum of the asset's reference (opaque; required in the private database).
    public var referenceChecksum: String?
    /// The key the file is wrapped with (opaque; required in the private database).
    public var wrappingKey: String?
    /// The upload's receipt, which saving a record whose field holds this asset claims.
    ///
    /// Only an asset just uploaded has one.
    public var receipt: String?
    /// Where the file's bytes can be fetched.
    ///
    /// Only an asset read from a record has one.
    public var downloadURL: URL?

    /// An asset; see the properties.
    public init(
        fileChecksum: String? = nil, size: Int64? = nil, referenceChecksum: String? = nil, wrappingKey: String? = nil,
        receipt: String? = nil, downloadURL: URL? = nil
    ) {
        self.fileChecksum = fileChecksum
        self.size = size
        self.referenceChecksum = referenceChecksum
        self.wrappingKey = wrappingKey
        self.receipt = receipt
        self.downloadURL = downloadURL
    }

    /// The asset dictionary, with the keys that are set.
    var json: [String: Any] {
        var object: [String: Any] = [:]
        if let fileChecksum { object["fileChecksum"] = fileChecksum }
        if let size { object["size"] = NSNumber(value: size) }
        if let referenceChecksum { object["referenceChecksum"] = referenceChecksum }
        if let wrappingKey { object["wrappingKey"] = wrappingKey }
        if let receipt { object["receipt"] = receipt }
        if let downloadURL { object["downloadURL"] = downloadURL.absoluteString }
        return object
    }

    /// An asset from an asset dictionary (an upload's `singleFile`, or a field's value); nil for anything else.
    init?(json any: Any) {
        guard let object = any as? [String: Any] else { return nil }
        fileChecksum = object["fileChecksum"] as? String
        size = (object["size"] as? NSNumber)?.int64Value ?? (object["size"] as? String).flatMap { Int64($0) }
        referenceChecksum = object["referenceChecksum"] as? String
        wrappingKey = object["wrappingKey"] as? String
        receipt = object["receipt"] as? String
        downloadURL = (object["downloadURL"] as? String).flatMap { URL(string: $0) }
    }
}
