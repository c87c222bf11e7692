import CloudSync
import CloudSyncDrive
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// What Drive said stays in the error as fields (the status Drive sent, its reason), beside the store's code.
@Suite struct DriveErrorContextTests {
    private func provider(answering answer: HTTPResponse) -> DriveProvider {
        DriveProvider(
            endpoint: URL(string: "https://drive.test")!, authenticator: NoAuthentication(),
            transport: TestTransport { _ in answer }, context: ProviderContext(providerID: "drive"),
            retryPolicy: RetryPolicy(maxAttempts: 1))
    }

    private func answer(_ status: Int, _ reason: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        let body = #"{"error":{"code":\#(status),"message":"said by Drive","errors":[{"reason":"\#(reason)"}]}}"#
        var response = HTTPResponse(status: status, body: Data(body.utf8))
        response.headers["Content-Type"] = "application/json"
        for (name, value) in headers { response.headers[name] = value }
        return response
    }

    private func error(_ answer: HTTPResponse) async -> CloudSyncError? {
        do {
            _ = try await provider(answering: answer).quota()
            return nil
        } catch {
            return error as? CloudSyncError
        }
    }

    @Test func a503IsAServerFailureWithDrivesReason() async {
        let error = await error(answer(503, "backendError"))
        #expect(error?.code == .server)
        #expect(
            error?.context
                == ErrorContext(httpStatus: 503, serviceCode: "backendError", serviceReason: "said by Drive"))
    }

    @Test func a429KeepsItsRetryAfter() async {
        let error = await error(answer(429, "rateLimitExceeded", headers: ["Retry-After": "3"]))
        #expect(error?.code == .rateLimited)
        #expect(error?.retryAfterMs == 3_000)
        #expect(error?.context?.httpStatus == 429 && error?.context?.serviceCode == "rateLimitExceeded")
    }

    @Test func a403RateLimitSaysDriveSent403() async {
        // Retried as a 429 below the retry layer, it is still the 403 Drive sent.
        let error = await error(answer(403, "userRateLimitExceeded"))
        #expect(error?.code == .rateLimited)
        #expect(error?.context?.httpStatus == 403 && error?.context?.serviceCode == "userRateLimitExceeded")
    }

    @Test func aFullAccountIsQuotaExceededWithDrivesReason() async {
        let error = await error(answer(403, "storageQuotaExceeded"))
        #expect(error?.code == .quotaExceeded)
        #expect(error?.context?.serviceCode == "storageQuotaExceeded")
    }
}
