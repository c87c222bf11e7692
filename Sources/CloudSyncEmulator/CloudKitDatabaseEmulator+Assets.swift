import CloudSync
import CloudSyncHTTP
import CloudSyncHTTPServer
import CloudSyncSodium
import Foundation
import Synchronization

/// Assets (api-facts B.4, B.5): `assets/upload`, the upload URLs, the `ASSET` fields of `records/modify` and the
/// download URLs of the `ASSETID` fields records are answered with.
///
/// What the emulator decides where the web services leave it open:
/// - An upload URL is good once (the upload that succeeds spends it) for ``Configuration/uploadURLLifetimeMs`` (15
///   minutes) on the emulator's clock; an expired, spent or unknown one answers 404 `NOT_FOUND` whose reason says
///   which, so the client asks `assets/upload` again.
/// - Bytes over ``Configuration/maxAssetBytes`` (50 MB) answer 413 with CloudKit's error dictionary, `BAD_REQUEST`,
///   and a reason naming the limit; the URL stays good for a smaller upload.
/// - A receipt is claimed once, by the record and field it was asked for; anything else (forged, another field, used
///   already) is that record's `BAD_REQUEST`, but for the same save sent again while the field still holds that
///   asset (a retry after a lost answer), which changes nothing. An asset no record claims within the upload URL's
///   lifetime is freed.
/// - A download URL serves the bytes for as long as a record holds the asset, with no time limit of its own (the web
///   services document none); deleting the record, its zone, or replacing the field frees the asset and the URL
///   answers 404.
extension CloudKitDatabaseEmulator {
    /// Where upload URLs point (followed by the upload's id).
    static let uploadPath = "/ckassets/upload/"
    /// Where download URLs point (followed by the asset's download id).
    static let downloadPath = "/ckassets/download/"

    // MARK: Test hooks

    /// Keeps asset bytes as files in `directory` from now on; `EmulatorServer` calls it with `DATA/cloudkit-assets`.
    public func keepAssets(in directory: String) throws {
        try assetBytes.keep(in: directory)
    }

    /// How many assets are stored (claimed by a record, or uploaded and waiting for one), and their bytes in all.
    public var storedAssets: (count: Int, bytes: Int64) {
        state.withLock { state in
            (state.assets.count, state.assets.values.reduce(0) { $0 + $1.size })
        }
    }

    // MARK: assets/upload

    /// `{"zoneID", "tokens": [{"recordName", "recordType", "fieldName"}]}` → `{"tokens": [{"recordName",
    /// "fieldName", "url"}]}`.
    func requestUploads(_ body: [String: Any], _ context: Context, _ state: inout SavedState) -> Answer {
        sweepAssets(context.now, context.configuration, &state)
        let tokens = body["tokens"] as? [[String: Any]] ?? []
        let limit = context.configuration.maxAssetTokens
        guard !tokens.isEmpty, tokens.count <= limit else {
            return (
                400,
                Self.error("BAD_REQUEST", "assets/upload takes from 1 to \(limit) tokens, not \(tokens.count)")
            )
        }
        let zone = Self.zoneName(body["zoneID"]) ?? "_defaultZone"
        if zone == "_defaultZone" {
            if context.configuration.defaultZoneRecords == .refused { return Self.defaultZoneRefusal }
        } else if state.databases[context.database]?.zones[zone] == nil {
            return (
                404,
                Self.error("ZONE_NOT_FOUND", "zone \(zone) does not exist", extra: ["zoneID": zoneID(zone, context)])
            )
        }
        var answered: [[String: Any]] = []
        for token in tokens {
            guard let recordName = token["recordName"] as? String, !recordName.isEmpty,
                let fieldName = token["fieldName"] as? String, !fieldName.isEmpty
            else {
                return (400, Self.error("BAD_REQUEST", "each token needs a recordName and a fieldName"))
            }
            let id = randomToken("", bytes: 18)
            state.uploads[id] = SavedState.Upload(
                database: context.database, zone: zone, recordName: recordName,
                recordType: token["recordType"] as? String ?? "", fieldName: fieldName,
                expiresMs: context.now + context.configuration.uploadURLLifetimeMs)
            answered.append([
                "recordName": recordName, "fieldName": fieldName, "url": context.base + Self.uploadPath + id,
            ])
        }
        return (200, ["tokens": answered])
    }

    // MARK: The upload URL

    /// The raw bytes of one asset, `POST`ed to an upload URL → `{"singleFile": {"wrappingKey", "fileChecksum",
    /// "receipt", "referenceChecksum", "size"}}`.
    func receiveUpload(_ request: ReceivedRequest) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        let now = clock.nowMilliseconds()
        let configuration = configuration.withLock { $0 }
        let found = state.withLock { state -> SavedState.Upload? in
            sweepAssets(now, configuration, &state)
            return state.uploads[id]
        }
        guard let upload = found else {
            freeUnreferencedAssets()
            return Self.json(
                404,
                Self.error(
                    "NOT_FOUND",
                    "this upload URL is unknown, was used already, or expired (upload URLs are good once, for "
                        + "\(configuration.uploadURLLifetimeMs / 60_000) minutes); ask assets/upload for another"))
        }
        let size = request.body.count
        guard size <= configuration.maxAssetBytes else {
            return Self.json(
                413,
                Self.error(
                    "BAD_REQUEST",
                    "the asset is too large: \(size) bytes, over the \(configuration.maxAssetBytes / 1_048_576) MB "
                        + "(\(configuration.maxAssetBytes) byte) limit of one asset field"))
        }
        let digest = Data(SHA256.hash(request.body)).base64EncodedString()
        let receipt = randomToken("", bytes: 24)
        let asset = SavedState.Asset(
            database: upload.database, zone: upload.zone, recordName: upload.recordName, fieldName: upload.fieldName,
            downloadID: randomToken("", bytes: 24), size: Int64(size), fileChecksum: digest,
            referenceChecksum: Data(SHA256.hash(Data((receipt + digest).utf8))).base64EncodedString(),
            wrappingKey: Data(SecureRandom.bytes(count: 32)).base64EncodedString(), uploadedMs: now)
        if let refused = store(asset, request.body, receipt: receipt, spending: id) { return refused }
        return Self.json(
            200,
            [
                "singleFile": [
                    "wrappingKey": asset.wrappingKey, "fileChecksum": asset.fileChecksum, "receipt": receipt,
                    "referenceChecksum": asset.referenceChecksum, "size": NSNumber(value: asset.size),
                ]
            ])
    }

    /// Stores `bytes` as `asset` and spends the upload URL `id` on it, filed under `receipt`; nil once done, else the
    /// answer: the bytes could not be stored, or another upload to the URL spent it first (its bytes are removed).
    private func store(_ asset: SavedState.Asset, _ bytes: Data, receipt: String, spending id: String) -> HTTPResponse?
    {
        assetLock.withLock { _ -> HTTPResponse? in
            do {
                try assetBytes.put(bytes, id: asset.downloadID)
            } catch {
                return Self.json(500, Self.error("INTERNAL_ERROR", "the emulator could not store the asset: \(error)"))
            }
            let spent = state.withLock { state -> Bool in
                // Another upload to the same URL may have won meanwhile.
                guard state.uploads.removeValue(forKey: id) != nil else { return false }
                state.assets[receipt] = asset
                return true
            }
            if !spent {
                assetBytes.removeAll(except: Set(state.withLock { $0.assets.values.map(\.downloadID) }))
                return Self.json(404, Self.error("NOT_FOUND", "this upload URL was used already"))
            }
            return nil
        }
    }

    // MARK: The download URL

    /// The bytes of a claimed asset; 404 `NOT_FOUND` once it was freed.
    func download(_ request: ReceivedRequest) -> HTTPResponse {
        let id = request.captures["id"] ?? ""
        let known = state.withLock { state in state.assets.values.contains { $0.downloadID == id && $0.claimed } }
        guard known, let data = assetBytes.get(id) else {
            return Self.json(
                404, Self.error("NOT_FOUND", "no asset is stored at this URL (its record or field was deleted)"))
        }
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: data)
    }

    // MARK: ASSET fields

    /// What an `ASSET` (or `ASSETID`) field value of `records/modify` stores, or why the record is refused.
    ///
    /// A value with a `receipt` claims the asset that receipt names, which must have been uploaded for this record
    /// and field of this zone and not claimed before; a value without one must be the asset the field holds already
    /// (a record read and saved back), told by its `fileChecksum`.
    func assetField(
        _ raw: Any, field: String, record: String, zone: String, existing: [String: Any]?, _ context: Context,
        _ state: SavedState
    ) -> Result<(stored: [String: Any], receipt: String?), AssetRefusal> {
        guard let value = raw as? [String: Any] else {
            return .failure(AssetRefusal("the value of asset field \(field) is not an asset dictionary"))
        }
        let held = (existing?[field] as? [String: Any])?["value"] as? [String: Any]
        guard let receipt = value["receipt"] as? String else {
            if let held, let checksum = value["fileChecksum"] as? String, held["fileChecksum"] as? String == checksum {
                return .success((held, nil))
            }
            return .failure(
                AssetRefusal(
                    "asset field \(field) needs the receipt of an upload (assets/upload, then the upload URL), or the "
                        + "fileChecksum of the asset it holds"))
        }
        guard let asset = state.assets[receipt], asset.database == context.database, asset.zone == zone,
            asset.recordName == record, asset.fieldName == field
        else {
            return .failure(
                AssetRefusal(
                    "the receipt of asset field \(field) of record \(record) was not issued for that record and field "
                        + "of zone \(zone), or was used already; upload the file again"))
        }
        if let checksum = value["fileChecksum"] as? String, checksum != asset.fileChecksum {
            return .failure(AssetRefusal("the fileChecksum of asset field \(field) is not the uploaded file's"))
        }
        if asset.claimed {
            // The same save again (a retry whose first answer was lost) finds the field holding it: nothing to claim.
            if let held, held["receipt"] as? String == receipt { return .success((held, nil)) }
            return .failure(
                AssetRefusal(
                    "the receipt of asset field \(field) of record \(record) was used already; upload the file again"))
        }
        let stored: [String: Any] = [
            "receipt": receipt, "downloadID": asset.downloadID, "fileChecksum": asset.fileChecksum,
            "size": NSNumber(value: asset.size), "referenceChecksum": asset.referenceChecksum,
            "wrappingKey": asset.wrappingKey,
        ]
        return .success((stored, receipt))
    }

    /// Why an asset field was refused.
    struct AssetRefusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The receipts a record's fields (`{"name": {"value": …, "type": …}}`) hold.
    static func receipts(in fields: [String: Any]) -> Set<String> {
        Set(
            fields.values.compactMap { field in
                guard let field = field as? [String: Any], field["type"] as? String == "ASSETID" else { return nil }
                return (field["value"] as? [String: Any])?["receipt"] as? String
            })
    }

    /// A stored field as records are answered with it: an asset's receipt and storage id give way to its
    /// `downloadURL`.
    static func answered(_ field: Any, base: String) -> Any {
        guard let field = field as? [String: Any], field["type"] as? String == "ASSETID",
            var value = field["value"] as? [String: Any], let id = value["downloadID"] as? String
        else { return field }
        value["receipt"] = nil
        value["downloadID"] = nil
        value["downloadURL"] = base + downloadPath + id
        return ["type": "ASSETID", "value": value]
    }

    // MARK: Freeing

    /// Forgets expired upload URLs and the assets no record claimed in time.
    func sweepAssets(_ now: Int64, _ configuration: Configuration, _ state: inout SavedState) {
        state.uploads = state.uploads.filter { $0.value.expiresMs >= now }
        state.assets = state.assets.filter {
            $0.value.claimed || $0.value.uploadedMs + configuration.uploadURLLifetimeMs >= now
        }
    }

    /// Removes the bytes of every asset the state no longer holds.
    func freeUnreferencedAssets() {
        assetLock.withLock { _ in
            let live = state.withLock { Set($0.assets.values.map(\.downloadID)) }
            assetBytes.removeAll(except: live)
        }
    }

    /// `scheme://host` of the request: its `Host` header, and `X-Forwarded-Proto`, else `https` for a request that
    /// came in over TLS, else `scheme`.
    static func base(of request: ReceivedRequest, scheme: String) -> String {
        let host = request.headers["Host"] ?? "127.0.0.1"
        let proto =
            request.headers["X-Forwarded-Proto"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (request.scheme == "https" ? "https" : scheme)
        return "\(proto)://\(host)"
    }

    /// The refusal of a records call naming `_defaultZone` when ``Configuration/defaultZoneRecords`` refuses it.
    static var defaultZoneRefusal: Answer {
        (
            400,
            error("BAD_REQUEST", "this emulator keeps records only in custom zones; create one with zones/modify")
        )
    }

    static func json(_ status: Int, _ object: [String: Any]) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": "application/json"],
            body: (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
    }
}
