import Foundation
import Synchronization

/// Where the CloudKit emulator keeps the bytes of its assets: files in a directory, or memory.
///
/// `--data DIR` gives `DIR/cloudkit-assets`, one file an asset. It holds only what it is given; the database decides
/// what is freed.
final class CloudKitAssetBytes: Sendable {
    private let directory = Mutex<String?>(nil)
    private let memory = Mutex<[String: Data]>([:])

    /// Keeps bytes from now on as files in `path` (created 0700 with the first file); bytes already in memory move
    /// there.
    func keep(in path: String) throws {
        let held = memory.withLock { held in
            defer { held = [:] }
            return held
        }
        directory.withLock { $0 = path }
        for (id, data) in held { try put(data, id: id) }
    }

    /// Stores `data` as `id`, replacing what was there.
    func put(_ data: Data, id: String) throws {
        if let path = file(id) {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
        } else {
            memory.withLock { $0[id] = data }
        }
    }

    /// The bytes stored as `id`, or nil.
    func get(_ id: String) -> Data? {
        if let path = file(id) { return FileManager.default.contents(atPath: path) }
        return memory.withLock { $0[id] }
    }

    /// Every stored id.
    var ids: Set<String> {
        if let path = directory.withLock({ $0 }) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            return Set(names.filter { !$0.hasPrefix(".") })
        }
        return Set(memory.withLock { $0.keys })
    }

    /// Forgets every id but those in `kept`.
    func removeAll(except kept: Set<String>) {
        for id in ids.subtracting(kept) {
            if let path = file(id) {
                try? FileManager.default.removeItem(atPath: path)
            } else {
                _ = memory.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// The file of `id` when a directory is in use.
    ///
    /// Ids are the emulator's own URL-safe base64, never a path.
    private func file(_ id: String) -> String? {
        directory.withLock { $0 }.map { $0 + "/" + id }
    }
}
