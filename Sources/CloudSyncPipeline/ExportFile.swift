import CloudSync
import CloudSyncCrypto
import CloudSyncLocal
import Foundation

/// The export file: `{"version": 2, "pipeline", "source", "exportedAt", "count", "items": [{"key", "value"}, …]}`
/// with plaintext values, the items in bytewise key order, or, encrypted, `{"version": 2, "codec", "keyId",
/// "encrypted": "<envelope>"}` where the envelope (see the README's envelope format) holds the plain form's JSON text
/// and its store key is `cloudsync.export`.
///
/// Items are a list, not a JSON object: a JSON reader keyed by `String` (Foundation's among them) merges keys that are
/// canonically equivalent, which are different keys to every provider. Version 1 files (`"items": {key: value}`)
/// are still read.
enum ExportFile {
    static let envelopeKey = "cloudsync.export"
    static let version = 2

    static func write(
        _ items: [KeyValue], to path: String, pipeline: String, source: String,
        codec: (id: String, codec: EnvelopeCodec)?
    )
        throws(CloudSyncError)
    {
        let plain: [String: Any] = [
            "version": version, "pipeline": pipeline, "source": source, "count": items.count,
            "exportedAt": iso8601(SystemClock().nowMilliseconds()),
            "items": items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }.map { ["key": $0.key, "value": $0.value] },
        ]
        do {
            var text = String(
                decoding: try JSONSerialization.data(withJSONObject: plain, options: [.sortedKeys]), as: UTF8.self)
            if let (codecID, codec) = codec {
                let envelope = try codec.encode(text, key: envelopeKey)
                // Both names a restore needs: the pipeline's codec, and the key of its ring that encrypted the file.
                let wrapped: [String: Any] = [
                    "version": version, "codec": codecID, "keyId": codec.keys[0].id, "encrypted": envelope,
                ]
                text = String(
                    decoding: try JSONSerialization.data(withJSONObject: wrapped, options: [.sortedKeys]), as: UTF8.self
                )
            }
            // Owner-only from its creation: the items are plaintext unless a codec sealed them.
            try OutputFile.write(text + "\n", to: path, mode: 0o600, what: "the export file")
        } catch let error as CloudSyncError {
            throw error
        } catch {
            throw CloudSyncError(
                .provider, "cannot write the export file \(path): \(describeFileError(error)); check its directory")
        }
    }

    /// The items of the export file at `path`, each key once (as bytes), in the file's order.
    static func read(_ path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) -> [KeyValue] {
        guard let data = FileManager.default.contents(atPath: path),
            var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else {
            throw CloudSyncError(.config, "\(path) is missing or is not an export file (JSON object)")
        }
        if let envelope = object["encrypted"] as? String {
            var opened: String?
            for codec in codecs {
                if let text = try? codec.decode(envelope, key: envelopeKey) {
                    opened = text
                    break
                }
            }
            guard let opened, let inner = (try? JSONSerialization.jsonObject(with: Data(opened.utf8))) as? [String: Any]
            else {
                throw CloudSyncError(
                    .decode,
                    "\(path) is encrypted and none of the pipeline's codecs opens it; add the key it was made with")
            }
            object = inner
        }
        switch object["version"] as? Int {
        case 1?:
            guard let items = object["items"] as? [String: String] else { break }
            return items.map { KeyValue($0.key, $0.value) }.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
        case version?:
            guard let list = object["items"] as? [Any] else { break }
            var items: [KeyValue] = []
            var seen = Set<StoreKey>()
            for (index, element) in list.enumerated() {
                guard let pair = element as? [String: Any], let key = pair["key"] as? String,
                    let value = pair["value"] as? String
                else {
                    throw CloudSyncError(
                        .config,
                        "\(path): item \(index) is not {\"key\": string, \"value\": string}; the file is damaged")
                }
                guard seen.insert(StoreKey(key)).inserted else {
                    throw CloudSyncError(
                        .config, "\(path) holds the key \(key) twice (items \(index) and earlier); the file is damaged",
                        key: key)
                }
                items.append(KeyValue(key, value))
            }
            return items
        default:
            break
        }
        throw CloudSyncError(
            .config,
            "\(path) is not a version 1 or \(version) export file with string items; make it with `cloudsync run` "
                + "(export job)")
    }
}
