import CloudSync
import CloudSyncHTTP
import CloudSyncOpenSSL
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Files under keys: the object's body is the file's bytes, sent from the file and received into one.
extension S3Provider: FileStoringProvider {
    /// The largest object S3 stores: 5 TiB.
    public static let maxObjectBytes: Int64 = 5 << 40
    /// The most parts one multipart upload takes.
    public static let maxParts: Int64 = 10_000
    /// File parts read and sent at once: four of at least ``filePartMinimum`` each, so a file of any size takes about
    /// that much memory (twice over while a part is sent).
    static let filePartsAtOnce = 4
    /// The smallest part of a file's multipart upload: 5 MiB, the smallest S3 takes.
    public static let filePartMinimum: Int64 = 5 << 20

    /// S3's own object limit, 5 TiB.
    public var maxFileBytes: Int64? { Self.maxObjectBytes }

    /// `PutObject` streamed from the file (unsigned payload) up to ``multipartThreshold`` bytes; above it a multipart
    /// upload whose parts (each with `Content-MD5`) are read from the file a few at a time, ``filePartMinimum`` each
    /// or larger to stay within ``maxParts``.
    public func putFile(_ key: String, from source: String, size: Int64) async throws {
        try ensureWritable()
        if size <= Int64(Self.multipartThreshold) {
            let request = HTTPRequest(
                method: .put, url: location.url(objectKey: objectKey(key)),
                headers: ["Content-Type": "application/octet-stream", "Content-Length": String(size)],
                uploadFile: URL(fileURLWithPath: source), transferBytes: size)
            _ = try await client.sendExpectingSuccess(request, key: key)
            return
        }
        let partSize = Self.filePartSize(for: size)
        let partCount = Int((size + partSize - 1) / partSize)
        let reader = try FilePartReader(path: source, provider: id, key: key)
        try await putMultipart(key, partCount: partCount, atOnce: Self.filePartsAtOnce) {
            number throws(CloudSyncError) in
            let start = Int64(number - 1) * partSize
            return try reader.read(at: start, count: Int(min(partSize, size - start)))
        }
    }

    /// The part size for a file of `size` bytes: ``filePartMinimum``, or the whole MiB that keeps it within
    /// ``maxParts``.
    public static func filePartSize(for size: Int64) -> Int64 {
        let mebibyte: Int64 = 1 << 20
        let needed = (size + maxParts - 1) / maxParts
        return max(filePartMinimum, (needed + mebibyte - 1) / mebibyte * mebibyte)
    }

    /// `HeadObject`: the object's `Content-Length`; nil for a 404.
    public func fileSize(_ key: String) async throws -> Int64? {
        try ensureOpen()
        let request = HTTPRequest(method: .head, url: location.url(objectKey: objectKey(key)))
        let response = try await client.send(request, key: key)
        // A HEAD answer has no body to carry S3's NoSuchKey: its 404 is the only word there is.
        if response.status == 404 { return nil }
        guard response.isSuccess else { throw client.failure(response, request, key: key) }
        guard let length = response.headers["Content-Length"].flatMap({ Int64($0) }) else {
            throw CloudSyncError(
                .provider, "\(location) answered HEAD of \(objectKey(key)) without a Content-Length", provider: id,
                key: key)
        }
        return length
    }

    /// `GetObject` received straight into `destination`; false for `NoSuchKey`.
    public func getFile(_ key: String, to destination: String, size: Int64) async throws -> Bool {
        try ensureOpen()
        let request = HTTPRequest(
            method: .get, url: location.url(objectKey: objectKey(key)), downloadFile: URL(fileURLWithPath: destination),
            transferBytes: size)
        let response = try await client.send(request, key: key)
        if response.status == 404, S3ErrorBody(response.body).code == "NoSuchKey" { return false }
        guard response.isSuccess else { throw client.failure(response, request, key: key) }
        return true
    }
}
