import CloudSync
import CloudSyncHTTP
import CloudSyncOpenSSL
import CloudSyncSodium
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Listing keys with ListObjectsV2, in bytewise order, each with its ETag as its version tag.
extension S3Provider {
    /// The key an object name under ``prefix`` stands for; nil for a name outside it or the prefix itself.
    ///
    /// The prefix is matched by bytes, as S3 matches it: `String.hasPrefix` would also take a canonically equivalent
    /// spelling.
    func key(ofObject object: String) -> String? {
        guard object.utf8.count > prefix.utf8.count, object.utf8.starts(with: prefix.utf8) else { return nil }
        return String(decoding: object.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// One `ListObjectsV2` page of at most `limit` keys (1,000 at most), in S3's order (UTF-8 binary); the cursor is
    /// the last object listed, which the next page starts after.
    public func listKeys(after cursor: String?, limit: Int) async throws -> KeyPage {
        try ensureOpen()
        return try await listPage(after: cursor, maxKeys: min(max(limit, 1), Self.batchLimit))
    }

    /// One ListObjectsV2 page after the object `startAfter` (the cursor: the last object the previous page listed).
    ///
    /// `start-after` names a key, not a position in a listing, so removals of keys already listed cannot shift it
    /// (a continuation token is opaque, and some S3-compatible servers make it an offset).
    func listPage(after startAfter: String?, maxKeys: Int) async throws(CloudSyncError) -> KeyPage {
        var query = "list-type=2&encoding-type=url&max-keys=\(maxKeys)&prefix=\(S3URIEncoding.encode(prefix))"
        if let startAfter { query += "&start-after=" + S3URIEncoding.encode(startAfter) }
        let request = HTTPRequest(method: .get, url: location.bucketURL(query: query))
        let response = try await client.sendExpectingSuccess(request)
        guard let result = XMLElement.parse(response.body), result.name == "ListBucketResult" else {
            throw CloudSyncError(
                .provider, "\(location) answered ListObjectsV2 with something other than a ListBucketResult",
                provider: id)
        }
        let urlEncoded = result.text(of: "EncodingType") == "url"
        let objects = result.children("Contents").compactMap {
            item -> (name: String, etag: String?, size: Int64?, modified: Int64?)? in
            item.text(of: "Key").map {
                (
                    urlEncoded ? HTTPForm.decode($0) : $0, item.text(of: "ETag"),
                    item.text(of: "Size").flatMap { Int64($0) },
                    item.text(of: "LastModified").flatMap { UTCTimestamp.milliseconds($0[...]) }
                )
            }
        }
        // S3 lists in byte order; a server that orders a page otherwise still yields each key once: the next page
        // starts after the page's largest name, and a name at or before the cursor was yielded already.
        let fresh =
            startAfter.map { cursor in objects.filter { StoreKey.compareBytes($0.name, cursor) > 0 } } ?? objects
        var keys: [String] = []
        var versions: [String?] = []
        var sizes: [Int64?] = []
        var modified: [Int64?] = []
        keys.reserveCapacity(fresh.count)
        modified.reserveCapacity(fresh.count)
        versions.reserveCapacity(fresh.count)
        sizes.reserveCapacity(fresh.count)
        for object in fresh {
            guard let key = key(ofObject: object.name) else { continue }
            keys.append(key)
            // The ETag changes with the object's bytes (an MD5 of them, or of its parts for a multipart upload).
            versions.append(object.etag)
            sizes.append(object.size)
            modified.append(object.modified)
        }
        let truncated = result.text(of: "IsTruncated") == "true"
        guard truncated else {
            return KeyPage(keys: keys, nextCursor: nil, versions: versions, sizes: sizes, modified: modified)
        }
        guard let largest = fresh.map(\.name).max(by: StoreKey.bytesPrecede) else {
            throw CloudSyncError(
                .provider,
                "\(location) answered a truncated ListObjectsV2 page with nothing after \(startAfter ?? "the start"); "
                    + "the listing would not end",
                provider: id)
        }
        return KeyPage(keys: keys, nextCursor: largest, versions: versions, sizes: sizes, modified: modified)
    }
}
