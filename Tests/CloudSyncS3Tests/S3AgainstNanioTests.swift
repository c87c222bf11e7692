import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// The s3 provider against nanio, a second S3 server that, unlike moto, checks every request's SigV4 signature: what
/// moto accepts unchecked is proven here against an independent implementation of the signing rules.
@Suite(.serialized, .timeLimit(.minutes(10))) struct S3AgainstNanioTests {
    static let starting = Task {
        try await MotoS3Server.startNanio(
            repository: Repository.root, accessKey: testCredentials.accessKeyID,
            secretKey: testCredentials.secretAccessKey, buckets: ["cloudsync-nanio"])
    }

    /// 2,500 keys, awkward names among them, and one nanio refuses (it takes no `.` or `..` path segments, from any
    /// client): every other key is written, read back and listed, and the one refused is that key's failure alone (a
    /// batch with it was reported failed, blaming the secret, while its other objects were all on the server).
    @Test func everyKeyButTheOneTheServerRefusesIsWrittenAndReportedSo() async throws {
        let endpoint = try await Self.starting.value.endpoint
        let provider = makeProvider(endpoint: endpoint, bucket: "cloudsync-nanio", prefix: "truth/")
        var keys = (0..<2_497).map { String(format: "k%05d", $0) }
        keys += ["a b+c&d=e", "é/日本/🌍", "dots/../refused"]
        let results = try await provider.set(keys.map { KeyValue($0, "value of \($0)") })
        let failed = zip(keys, results).filter { if case .failure = $0.1 { true } else { false } }.map(\.0)
        #expect(failed == ["dots/../refused"])
        if case .failure(let refused) = results.last {
            #expect(refused.code == .provider && !refused.message.contains("secret access key"), "\(refused)")
        }
        let written = Array(keys.dropLast())
        #expect(try await listEveryKey(of: provider, pageSize: 1000).sorted() == written.sorted())
        let read = try await provider.get(Array(written.suffix(3)))
        #expect(try read.map { try $0.get() } == written.suffix(3).map { "value of \($0)" })
        #expect(try await provider.remove(written).allSatisfy { (try? $0.get()) != nil })
        #expect(try await listEveryKey(of: provider, pageSize: 1000).isEmpty)
    }

    /// A wrong secret is refused on every request: the batch fails as a whole, naming the secret.
    @Test func aWrongSecretFailsTheBatchAndSaysSo() async throws {
        let endpoint = try await Self.starting.value.endpoint
        let provider = S3Provider(
            location: S3Location(endpoint: endpoint, bucket: "cloudsync-nanio", region: "us-east-1", pathStyle: true),
            prefix: "wrong/",
            credentials: S3Credentials(accessKeyID: testCredentials.accessKeyID, secretAccessKey: "no"),
            transport: URLSessionTransport(maxConcurrency: 4), context: ProviderContext(providerID: "bucket"),
            timeout: .seconds(60), maxConcurrency: 4,
            retryPolicy: RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(5), maxDelay: .milliseconds(50)))
        let error = await #expect(throws: CloudSyncError.self) {
            try await provider.set((0..<8).map { KeyValue("k\($0)", "v") })
        }
        #expect(error?.code == .notSignedIn && error?.message.contains("secret access key") == true)
    }
}
