import CloudSync
import CloudSyncDrive
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

@Suite struct DriveCloseTests {
    @Test func closingTheProviderReleasesItsHTTPSession() async throws {
        let transport = TestTransport(script: [])
        let provider = DriveProvider(
            endpoint: URL(string: "https://drive.test")!, authenticator: NoAuthentication(), transport: transport,
            context: ProviderContext(providerID: "drive"))
        await provider.close()
        #expect(transport.closeCount >= 1)
        #expect(transport.requests.isEmpty)
    }
}
