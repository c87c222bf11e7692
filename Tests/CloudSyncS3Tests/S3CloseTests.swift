import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

@Suite struct S3CloseTests {
    @Test func closingTheProviderReleasesItsHTTPSession() async throws {
        let transport = TestTransport(script: [])
        let provider = S3Provider(
            location: S3Location(
                endpoint: URL(string: "http://127.0.0.1:1")!, bucket: "b", region: "us-east-1", pathStyle: true),
            credentials: S3Credentials(accessKeyID: "AKIA", secretAccessKey: "secret"), transport: transport,
            context: ProviderContext(providerID: "bucket"))
        await provider.close()
        #expect(transport.closeCount >= 1)
        #expect(transport.requests.isEmpty)
    }
}
