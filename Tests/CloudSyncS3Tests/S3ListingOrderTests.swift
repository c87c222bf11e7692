import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// An S3-compatible server whose continuation tokens are offsets and whose pages are sorted or shuffled its own way:
/// the provider still yields every key exactly once, and keeps yielding them while the pages it already yielded are
/// removed.
@Suite struct S3ListingOrderTests {
    enum Order: String, CaseIterable { case bytes, caseInsensitive, shuffled }

    /// Answers ListObjectsV2 over `names`, two objects a page chosen by byte order after `start-after`, each page
    /// ordered by `order`; DeleteObjects removes.
    final class Bucket: Sendable {
        let names: Protected<[String]>
        let order: Order

        init(_ names: [String], order: Order) {
            self.names = Protected(names)
            self.order = order
        }

        func answer(_ request: HTTPRequest) -> HTTPResponse {
            let query = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            if request.method == .post {
                let body = String(decoding: request.body, as: UTF8.self)
                let removed = body.components(separatedBy: "<Key>").dropFirst().compactMap {
                    $0.components(separatedBy: "</Key>").first
                }
                names.withLock { names in names.removeAll { removed.contains($0) } }
                return HTTPResponse(status: 200, body: Data("<DeleteResult></DeleteResult>".utf8))
            }
            let after = query.first { $0.name == "start-after" }?.value
            // A continuation token is an offset here, as some S3-compatible servers make it.
            let offset = query.first { $0.name == "continuation-token" }?.value.flatMap { Int($0) } ?? 0
            let all = Array(
                names.withLock { $0 }.sortedAsKeys().filter { name in
                    after.map { StoreKey.bytesPrecede($0, name) } ?? true
                }
                .dropFirst(offset))
            var page = Array(all.prefix(2))
            switch order {
            case .bytes: break
            case .caseInsensitive: page.sort { ($0.lowercased(), $0) < ($1.lowercased(), $1) }
            case .shuffled: page.reverse()
            }
            let contents = page.map { "<Contents><Key>\($0)</Key></Contents>" }.joined()
            let next = all.count > 2 ? "<NextContinuationToken>\(offset + 2)</NextContinuationToken>" : ""
            let xml =
                "<ListBucketResult><IsTruncated>\(all.count > 2)</IsTruncated>\(next)\(contents)</ListBucketResult>"
            return HTTPResponse(status: 200, body: Data(xml.utf8))
        }
    }

    func provider(_ bucket: Bucket) -> S3Provider {
        S3Provider(
            location: S3Location(
                endpoint: URL(string: "http://127.0.0.1:1")!, bucket: "b", region: "us-east-1", pathStyle: true),
            credentials: S3Credentials(accessKeyID: "AKIA", secretAccessKey: "secret"),
            transport: TestTransport { request in bucket.answer(request) }, context: ProviderContext(providerID: "s3"))
    }

    @Test(arguments: Order.allCases)
    func everyKeyIsListedOnce(order: Order) async throws {
        let bucket = Bucket(KeyTwins.caseMixed, order: order)
        let listed = try await listEveryKey(of: provider(bucket), pageSize: 2)
        #expect(listed.count == KeyTwins.caseMixed.count)
        #expect(listed.keySet() == KeyTwins.caseMixed.keySet())
    }

    @Test(arguments: Order.allCases)
    func removingEachPageBeforeTheNextLeavesNothing(order: Order) async throws {
        let bucket = Bucket(KeyTwins.caseMixed, order: order)
        let s3 = provider(bucket)
        var cursor: String?
        var removed = 0
        repeat {
            let page = try await s3.listKeys(after: cursor, limit: 2)
            _ = try await s3.remove(page.keys)
            removed += page.keys.count
            cursor = page.nextCursor
        } while cursor != nil
        #expect(removed == KeyTwins.caseMixed.count)
        #expect(bucket.names.withLock { $0 }.isEmpty)
    }
}
