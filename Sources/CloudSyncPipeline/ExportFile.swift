import CloudSync
import CloudSyncCrypto
import CloudSyncLocal
import Foundation

/// The export file: `{"version": 1, "pipeline", "source", "exportedAt", "count", "items": {key: plaintext value}}`,
/// or, encrypted, `{"version": 1, "codec", "encrypted": "<envelope>"}` where the envelope (see the README's envelope
/// format) holds the plain form's JSON text and its store key is `cloudsync.export`.
enum ExportFile {
    static let envelopeKey = "cloudsync.export"

    static func write(
        _ items: [String: String], to path: String, pipeline: String, source: String,
        codec: (id: String, codec: EnvelopeCodec)?
    )
        throws(CloudSyncError)
    {
        let plain: [String: Any] = [
            "version": 1, "pipeline": pipeline, "source": source, "count": items.count,
            "exportedAt": iso8601(SystemClock().nowMilliseconds()), "items": items,
        ]
        do {
            var text = String(
                decoding: try JSONSerialization.data(withJSONObject: plain, options: [.sortedKeys]), as: UTF8.self)
            if let (codecID, codec) = codec {
                let envelope = try codec.encode(text, key: envelopeKey)
                // Both names a restore needs: the pipeline's codec, and the key of its ring that encrypted the file.
                let wrapped: [String: Any] = [
                    "version": 1, "codec": codecID, "keyId": codec.keys[0].id, "encrypted": envelope,
                ]
                text = String(
                    decoding: try JSONSerialization.data(withJSONObject: wrapped, options: [.sortedKeys]), as: UTF8.self
                )
            }
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try (text + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o600)
        } catch {
            throw CloudSyncError(
                .provider, "cannot write the export file \(path): \(describeFileError(error)); check its directory")
        }
    }

    static func read(_ path: String, codecs: [EnvelopeCodec]) throws(CloudSyncError) -> [String: String] {
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
        guard object["version"] as? Int == 1, let items = object["items"] as? [String: String] else {
            throw CloudSyncError(.config, "\(path) is not a version 1 export file with string items")
        }
        return items
    }
}
