import CloudSync
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// What S3 said stays in the error as fields (status, S3's code, its request id), beside the store's code.
@Suite struct S3ErrorContextTests {
    /// A provider every request of which gets `answer`, tried once.
    private func provider(answering answer: HTTPResponse) -> S3Provider {
        S3Provider(
            location: S3Location(
                endpoint: URL(string: "http://s3.test")!, bucket: "b", region: "us-east-1", pathStyle: true),
            credentials: S3Credentials(accessKeyID: "AKIA", secretAccessKey: "secret"),
            transport: TestTransport { _ in answer }, context: ProviderContext(providerID: "bucket"),
            retryPolicy: RetryPolicy(maxAttempts: 1))
    }

    private func answer(_ status: Int, _ code: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var response = s3Error(status, code, "said by S3")
        response.headers["x-amz-request-id"] = "REQ123"
        for (name, value) in headers { response.headers[name] = value }
        return response
    }

    @Test func aSlowDownIsRateLimitedAndKeepsS3sCodeStatusAndRequestID() async throws {
        let error = await firstError { try await provider(answering: answer(503, "SlowDown")).get(["k"]) }
        #expect(error?.code == .rateLimited)
        #expect(
            error?.context
                == ErrorContext(
                    httpStatus: 503, serviceCode: "SlowDown", serviceReason: "said by S3", requestID: "REQ123"))
    }

    @Test func a429KeepsItsRetryAfterAndStatus() async throws {
        let error = await firstError {
            try await provider(answering: answer(429, "TooManyRequests", headers: ["Retry-After": "7"])).get(["k"])
        }
        #expect(error?.code == .rateLimited)
        #expect(error?.retryAfterMs == 7_000)
        #expect(error?.context?.httpStatus == 429)
        #expect(error?.context?.serviceCode == "TooManyRequests")
    }

    @Test func aRefusalAndAFullBucketKeepS3sCodes() async throws {
        let denied = await firstError { try await provider(answering: answer(403, "AccessDenied")).get(["k"]) }
        #expect(denied?.code == .containerMisconfigured)
        #expect(denied?.context?.httpStatus == 403 && denied?.context?.serviceCode == "AccessDenied")
        let full = await firstError {
            try await provider(answering: answer(403, "QuotaExceeded")).set([KeyValue("k", "v")])
        }
        #expect(full?.code == .quotaExceeded)
        #expect(full?.context?.serviceCode == "QuotaExceeded" && full?.context?.requestID == "REQ123")
    }
}
