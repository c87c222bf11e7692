import CloudSync
import CloudSyncAuth
import CloudSyncCloudKit
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// What CloudKit said stays in the error as fields (status, `serverErrorCode`, `reason`), beside the store's code.
@Suite struct CloudKitErrorContextTests {
    private func provider(answering answer: HTTPResponse) throws -> CloudKitProvider {
        var once = CloudKitBridge.defaultRetryPolicy
        once.maxAttempts = 1
        let bridge = CloudKitBridge(
            configuration: try CloudKitFixture().configuration(),
            webAuthToken: try CloudKitWebAuthToken(
                state: ProviderState(provider: "ck", store: InMemoryProviderStateStore()), fallback: "token"),
            transport: TestTransport { _ in answer }, context: ProviderContext(providerID: "ck"),
            retryPolicy: once)
        return CloudKitProvider(id: "ck", bridge: bridge)
    }

    private func answer(_ status: Int, _ code: String, retryAfter: Int? = nil) -> HTTPResponse {
        var body = #"{"uuid":"u-1","serverErrorCode":"\#(code)","reason":"said by CloudKit""#
        if let retryAfter { body += #","retryAfter":\#(retryAfter)"# }
        return HTTPResponse(
            status: status, headers: ["Content-Type": "application/json"], body: Data((body + "}").utf8))
    }

    @Test func a503TryAgainLaterKeepsCloudKitsCode() async throws {
        let error = await firstError { try await provider(answering: answer(503, "TRY_AGAIN_LATER")).get(["k"]) }
        #expect(error?.code == .rateLimited)
        #expect(
            error?.context
                == ErrorContext(httpStatus: 503, serviceCode: "TRY_AGAIN_LATER", serviceReason: "said by CloudKit"))
    }

    @Test func a429ThrottledKeepsItsRetryAfter() async throws {
        let error = await firstError {
            try await provider(answering: answer(429, "THROTTLED", retryAfter: 4)).get(["k"])
        }
        #expect(error?.code == .rateLimited)
        #expect(error?.retryAfterMs == 4_000)
        #expect(error?.context?.httpStatus == 429 && error?.context?.serviceCode == "THROTTLED")
    }

    @Test func aRefusalAndAFullAccountKeepCloudKitsCodes() async throws {
        let denied = await firstError { try await provider(answering: answer(403, "ACCESS_DENIED")).get(["k"]) }
        #expect(denied?.code == .containerMisconfigured)
        #expect(denied?.context?.httpStatus == 403 && denied?.context?.serviceCode == "ACCESS_DENIED")
        let full = await firstError {
            try await provider(answering: answer(413, "QUOTA_EXCEEDED")).set([KeyValue("k", "v")])
        }
        #expect(full?.code == .quotaExceeded)
        #expect(full?.context?.serviceCode == "QUOTA_EXCEEDED")
    }
}
