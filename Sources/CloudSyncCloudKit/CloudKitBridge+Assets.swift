import CloudSync
import CloudSyncHTTP
import Foundation

/// Assets: files in records' Asset fields, given as paths and streamed, never read into memory whole.
///
/// The web services' flow (api-facts B.5): `assets/upload` hands out an upload URL for a record's field (good for 15
/// minutes), the file's bytes are `POST`ed there and answered with the asset dictionary, and a `records/modify` whose
/// field holds that dictionary claims it. Records read back hold the asset with a `downloadURL`.
///
/// To keep a file under a name: ``uploadAsset(fileAt:recordName:recordType:fieldName:)``, then save the record with
/// the field set to `.asset(asset)` (``modify(_:)`` with `forceReplace`, or ``saveRecords(_:)``); to get it back,
/// ``downloadAsset(recordName:fieldName:to:)``. Deleting the record, or saving it without the field, frees the file.
/// A file over 50 MB (``maxAssetBytes``) is refused before anything is sent.
extension CloudKitBridge {
    /// The largest file one Asset field holds: 50 MB (api-facts B.4).
    public static let maxAssetBytes: Int64 = 52_428_800

    /// Uploads the file at `path` for the Asset field `fieldName` of the record `recordName` (of `recordType`) in the
    /// bridge's zone, and returns the asset to save in that field; the file is streamed from disk.
    ///
    /// Asks `assets/upload` for an upload URL, then sends the file there. Until a record claims it, the upload is
    /// kept only briefly. Throws `CK_BAD_INPUT` for a file that cannot be read or is over 50 MB (its `underlying`
    /// error is then `ERR_PAYLOAD_TOO_LARGE`), before anything is sent.
    public func uploadAsset(fileAt path: String, recordName: String, recordType: String, fieldName: String)
        async throws(CloudKitError) -> CloudKitAsset
    {
        _ = try Self.assetFileSize(path)
        let url = try await assetUploadURL(recordName: recordName, recordType: recordType, fieldName: fieldName)
        return try await uploadAsset(fileAt: path, to: url)
    }

    /// An upload URL for the Asset field `fieldName` of the record `recordName` (of `recordType`) in the bridge's
    /// zone, from `assets/upload`; it is good for one upload within 15 minutes.
    public func assetUploadURL(recordName: String, recordType: String, fieldName: String)
        async throws(CloudKitError) -> URL
    {
        let body: [String: Any] = [
            "zoneID": ["zoneName": configuration.zoneName],
            "tokens": [["recordName": recordName, "recordType": recordType, "fieldName": fieldName]],
        ]
        // Asking again only hands out another URL, so a lost answer may be asked again.
        let answer = try await call(
            .post, configuration.url("assets/upload"), body: body,
            doing: "asking for an upload URL for \(recordName).\(fieldName)", retrySafe: true)
        guard let token = (answer["tokens"] as? [[String: Any]])?.first else {
            throw CloudKitError(.error, "CloudKit answered assets/upload without a token")
        }
        if token["serverErrorCode"] is String {
            throw CloudKitError.from(
                dictionary: token, httpStatus: nil, doing: "asking for an upload URL for \(recordName).\(fieldName)",
                secrets: secrets)
        }
        guard let text = token["url"] as? String, let url = URL(string: text), url.scheme != nil else {
            throw CloudKitError(.error, "CloudKit answered assets/upload without an upload URL")
        }
        return url
    }

    /// Sends the file at `path` to `url` (from ``assetUploadURL(recordName:recordType:fieldName:)``), streamed from
    /// disk, and returns the asset CloudKit made of it; no CloudKit token is sent with it.
    ///
    /// Throws `CK_BAD_INPUT` for a file that cannot be read or is over 50 MB (before anything is sent), and for a URL
    /// that expired or was used: ask for another.
    public func uploadAsset(fileAt path: String, to url: URL) async throws(CloudKitError) -> CloudKitAsset {
        let size = try Self.assetFileSize(path)
        var request = HTTPRequest(
            method: .post, url: url, uploadFile: URL(fileURLWithPath: path), transferBytes: size)
        request.headers["Content-Type"] = "application/octet-stream"
        let what = "uploading \(path) (\(size) bytes)"
        let response = try await sendContent(request, doing: what)
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard let file = object?["singleFile"], let asset = CloudKitAsset(json: file), asset.receipt != nil else {
            throw CloudKitError(.error, "CloudKit answered the upload of \(path) without a singleFile receipt")
        }
        return asset
    }

    /// Fetches `asset` (as read from a record: it has a ``CloudKitAsset/downloadURL``) into the file at `path`.
    ///
    /// The file is replaced, the bytes streamed to disk. No CloudKit token is sent with it.
    public func downloadAsset(_ asset: CloudKitAsset, to path: String) async throws(CloudKitError) {
        guard let url = asset.downloadURL else {
            throw CloudKitError(
                .badInput, "the asset has no downloadURL: only an asset read from a record can be downloaded")
        }
        let request = HTTPRequest(
            method: .get, url: url, downloadFile: URL(fileURLWithPath: path), transferBytes: asset.size)
        _ = try await sendContent(request, doing: "downloading an asset to \(path)")
    }

    /// Reads the record `recordName` and fetches the asset of its field `fieldName` into the file at `path`,
    /// streamed; returns the asset, or nil (and leaves `path` alone) when the record does not exist.
    ///
    /// Throws `CK_BAD_INPUT` when the record has no asset in that field.
    public func downloadAsset(recordName: String, fieldName: String, to path: String)
        async throws(CloudKitError) -> CloudKitAsset?
    {
        guard let found = try await lookup([recordName]).first else { return nil }
        guard let record = try found.get() else { return nil }
        guard let asset = record.fields[fieldName]?.assetValue else {
            throw CloudKitError(
                .badInput, "the record \(recordName) has no asset in its field \(fieldName)", recordName: recordName)
        }
        try await downloadAsset(asset, to: path)
        return asset
    }

    // MARK: Sending

    /// The size of the file at `path`, refused when it cannot be read or is over ``maxAssetBytes``.
    static func assetFileSize(_ path: String) throws(CloudKitError) -> Int64 {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw CloudKitError(.badInput, "cannot read the file \(path) to upload it as an asset: \(error)")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular,
            let size = (attributes[.size] as? NSNumber)?.int64Value
        else {
            throw CloudKitError(.badInput, "\(path) is not a regular file; an asset is uploaded from one")
        }
        guard size <= maxAssetBytes else {
            let message =
                "the file \(path) is \(size) bytes, over the 50 MB (\(maxAssetBytes) byte) limit of one CloudKit "
                + "asset; nothing was uploaded"
            throw CloudKitError(
                .badInput, message, underlying: CloudSyncError(.payloadTooLarge, message))
        }
        return size
    }

    /// Sends a request to an upload or download URL and returns its 2xx answer; anything else is thrown as CloudKit's
    /// error dictionary describes it (413: the asset is too large, `underlying` `ERR_PAYLOAD_TOO_LARGE`).
    private func sendContent(_ request: HTTPRequest, doing what: String) async throws(CloudKitError) -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try await content.send(request)
        } catch {
            throw gaveUp(error, doing: what)
        }
        guard response.isSuccess else {
            let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
            var error =
                object.map {
                    CloudKitError.from(dictionary: $0, httpStatus: response.status, doing: what, secrets: secrets)
                }
                ?? CloudKitError(.error, "\(what): HTTP \(response.status)", httpStatus: response.status)
            if response.status == 413 {
                error.code = .badInput
                error.underlying = CloudSyncError(.payloadTooLarge, error.text)
            }
            throw error
        }
        return response
    }
}
