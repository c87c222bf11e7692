import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

@Suite struct CloudKitCloseTests {
    @Test func closingTheProviderReleasesItsHTTPSession() async throws {
        let fixture = try CloudKitFixture()
        let transport = TestTransport(script: [])
        let bridge = CloudKitBridge(
            configuration: fixture.configuration(),
            webAuthToken: try CloudKitWebAuthToken(
                state: ProviderState(provider: "ck", store: InMemoryProviderStateStore()), fallback: "token"),
            transport: transport, context: ProviderContext(providerID: "ck"))
        let provider = CloudKitProvider(id: "ck", bridge: bridge)
        await provider.close()
        #expect(transport.closeCount >= 1)
        #expect(transport.requests.isEmpty)
    }
}
