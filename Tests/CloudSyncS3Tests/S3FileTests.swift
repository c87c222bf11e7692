import CloudSync
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// Files under keys on S3, against moto: objects sent from files and received into them, in parts above the
/// multipart threshold.
@Suite(.timeLimit(.minutes(10))) struct S3FileTests {
    @Test func s3PassesTheFileChecks() async throws {
        let endpoint = try await SharedMoto.endpoint()
        let counter = Counter()
        let failures = await ProviderConformanceSuite.runFiles {
            makeProvider(endpoint: endpoint, bucket: "cloudsync-tests", prefix: "file-conformance-\(counter.next())/")
        }
        #expect(failures == [])
    }

    @Test func aFileOverTheThresholdGoesUpInPartsAndComesBackWhole() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-large", prefix: "files/")
        // No store deadline: the chunk and request counts are the subject, and a loaded machine has held the
        // availability probe past 15 s.
        var options = StoreOptions()
        options.timeout = nil
        let store = try CloudStore(providers: [provider], options: options)
        let scratch = try TemporaryDirectory(prefix: "s3-files")
        let size = S3Provider.multipartThreshold + 1
        let data = ProviderConformanceSuite.fileBytes(count: size, start: 7)
        try data.write(to: URL(fileURLWithPath: scratch.file("big.bin")))

        let receipt = try await store.putFile("videos/big.bin", from: scratch.file("big.bin"))
        #expect(receipt.size == Int64(size))
        // 64 MiB + 1 byte in 5 MiB parts: thirteen part uploads, no single PutObject of the whole.
        #expect(proxy.count("PUT", query: "partNumber") == 13)
        #expect(proxy.count("PUT") == 13)
        #expect(proxy.count("POST", query: "uploads") == 1)
        // Each part is bound by its signed Content-MD5, not hashed a second time for the signature.
        let parts = proxy.server.requestLog.filter { $0.method == "PUT" }
        #expect(parts.allSatisfy { $0.headers["Content-MD5"] != nil })
        #expect(parts.allSatisfy { $0.headers["Authorization"]?.contains("content-md5") == true })
        #expect(parts.allSatisfy { $0.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD" })

        let back = try await store.getFile("videos/big.bin", to: scratch.file("back.bin"))
        #expect(back?.size == Int64(size))
        #expect(FileManager.default.contents(atPath: scratch.file("back.bin")) == data)
        try await store.remove("videos/big.bin")
    }

    @Test func aSmallFileIsOnePutStreamedFromTheFile() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "small-file/")
        let scratch = try TemporaryDirectory(prefix: "s3-files")
        let data = ProviderConformanceSuite.fileBytes(count: 300_000)
        try data.write(to: URL(fileURLWithPath: scratch.file("in")))
        try await provider.putFile("k", from: scratch.file("in"), size: Int64(data.count))
        let puts = proxy.server.requestLog.filter { $0.method == "PUT" }
        #expect(puts.map(\.bodySize) == [data.count])
        #expect(puts.first?.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD")
        // Through the proxy: a relayed HEAD keeps moto's Content-Length.
        #expect(try await provider.fileSize("k") == Int64(data.count))
    }

    @Test func partsGrowSoAnyObjectS3TakesFitsInTenThousand() {
        #expect(S3Provider.filePartSize(for: 1) == S3Provider.filePartMinimum)
        #expect(S3Provider.filePartSize(for: 40 << 30) == S3Provider.filePartMinimum)
        for size: Int64 in [(1 << 40), S3Provider.maxObjectBytes, S3Provider.maxObjectBytes - 1] {
            let part = S3Provider.filePartSize(for: size)
            #expect((size + part - 1) / part <= S3Provider.maxParts, "\(size)")
            #expect(part % (1 << 20) == 0)
        }
    }
}
