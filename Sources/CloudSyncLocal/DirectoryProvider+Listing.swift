import CloudSync
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Listing keys in bytewise order from walks of the tree a window at a time, and the file system's quota.
extension DirectoryProvider {
    /// Pages in bytewise (UTF-8) order of the keys, as every listing a sync merges must.
    ///
    /// The encoded file names sort differently, so each name is decoded and the keys sorted. A listing's first page
    /// walks the tree once and keeps its keys (up to `DirectoryListings.windowKeys`, so memory stays bounded however
    /// many files there are); its later pages come from that walk, so a full listing costs one walk and one sort, not
    /// one walk per page. See `DirectoryListings` for what a listing sees of files added or removed meanwhile.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        metrics.recordRequest()
        let limit = max(limit, 1)
        if let cursor, let page = listings.page(after: cursor, limit: limit, now: .now) { return page }
        return try await LocalFiles.offload { [self] in
            let window = try walkWindow(after: cursor, keeping: max(limit, DirectoryListings.windowKeys))
            return listings.firstPage(of: window, limit: limit, now: .now)
        }
    }

    /// The smallest `keeping` keys after `cursor`, sorted, with their files' versions, from one walk of the tree.
    func walkWindow(after cursor: String?, keeping: Int) throws -> DirectoryListingWindow {
        var smallest = SmallestKeys(after: cursor, keeping: keeping)
        let now = fileTimeNow()
        try walk(root, pieces: []) { key, status in
            smallest.offer(
                key, version: status.flatMap { FileVersion($0, now: now) }, size: status.map { Int64($0.st_size) },
                modified: status.map { Int64($0.st_mtim.tv_sec) * 1000 + Int64($0.st_mtim.tv_nsec) / 1_000_000 })
        }
        let (keys, versions, sizes, modified) = smallest.sortedKeys()
        return DirectoryListingWindow(
            keys: keys, versions: versions, sizes: sizes, modified: modified, complete: !smallest.truncated, now: .now)
    }

    /// Calls `visit` with the key (UTF-8 bytes) of every key file under `directory`, skipping temporary and foreign
    /// files, and the file's status (nil when it could not be read: the file went meanwhile).
    ///
    /// `pieces` are the path components from the root down to `directory`.
    func walk(
        _ directory: String, pieces: [String], _ visit: (UnsafeBufferPointer<UInt8>, stat?) -> Void
    ) throws {
        let code = try DirectoryEntries.forEach(in: directory) { name, type, descriptor in
            guard name.first != UInt8(ascii: ".") else { return }
            var kind: mode_t
            var info = stat()
            var known = false
            switch type {
            case DirectoryEntries.directory: kind = S_IFDIR
            case DirectoryEntries.regularFile: kind = S_IFREG
            case DirectoryEntries.unknown:
                guard fstatat(descriptor, cName(name), &info, AT_SYMLINK_NOFOLLOW) == 0 else { return }
                kind = info.st_mode & S_IFMT
                known = true
            default: return
            }
            if kind == S_IFREG, !known {
                // The version tag: one fstatat a file, far less than reading it to see whether it changed.
                known = fstatat(descriptor, cName(name), &info, AT_SYMLINK_NOFOLLOW) == 0
            }
            let status = known ? info : nil
            if kind == S_IFREG, pieces.isEmpty {
                // Only names encoding produces, in the place it puts them, are keys. Most escape nothing: such a
                // name is its own key, passed on as it lies in the directory.
                guard name.count <= FileNameMapping.maxFileNameBytes else { return }
                if FileNameMapping.isOwnKey(name) {
                    visit(name, status)
                } else if var key = FileNameMapping.decode(String(decoding: name, as: UTF8.self)) {
                    key.withUTF8 { visit($0, status) }
                }
            } else if kind == S_IFREG {
                let components = pieces + [String(decoding: name, as: UTF8.self)]
                let encoded = components.map { String($0.dropFirst()) }.joined()
                if var key = FileNameMapping.decode(encoded), FileNameMapping.components(of: encoded) == components {
                    key.withUTF8 { visit($0, status) }
                }
            } else if kind == S_IFDIR, name.first == UInt8(ascii: "+") {
                let piece = String(decoding: name, as: UTF8.self)
                try walk(directory + "/" + piece, pieces: pieces + [piece], visit)
            }
        }
        guard code == 0 else { throw failure("read the directory", directory, code) }
    }

    /// A directory entry's name as the C string it is in place (the kernel's record ends it with NUL).
    func cName(_ name: UnsafeBufferPointer<UInt8>) -> UnsafePointer<CChar> {
        UnsafeRawPointer(name.baseAddress!).assumingMemoryBound(to: CChar.self)
    }

    /// The file system's figures: used and total bytes of the whole file system the root is on.
    public func quota() async throws -> ProviderQuota? {
        try ensureOpen()
        metrics.recordRequest()
        var info = statvfs()
        guard statvfs(root, &info) == 0 else { throw failure("measure the file system of", root, errno) }
        let blockSize = Int64(info.f_frsize)
        return ProviderQuota(
            usedBytes: (Int64(info.f_blocks) - Int64(info.f_bfree)) * blockSize,
            totalBytes: Int64(info.f_blocks) * blockSize)
    }
}
