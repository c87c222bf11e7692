import CloudSync
import CloudSyncDrive
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@Suite struct DriveBehaviourTests {
    @Test func anExpiredAccessTokenIsRefreshedOnceAndTheRequestSentAgain() async throws {
        let host = try DriveHost(accessTokenLifetime: .seconds(3599))
        let provider = host.provider()
        #expect(succeeded(try await provider.set([KeyValue("k", "v")])))
        #expect(host.tokenRequests == 1)
        // The emulator's clock passes the token's hour; the provider's own clock does not know, so the 401 tells it.
        host.clock.advance(by: .seconds(3600))
        host.clearLog()
        #expect(try values(await provider.get(["k"])) == ["v"])
        #expect(host.tokenRequests == 1)
        #expect(host.log.map(\.status) == [401, 200])
    }

    @Test func aRevokedRefreshTokenIsNotSignedInNamingLogin() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        host.drive.oauth.revoke(token: account.refreshToken)
        let provider = host.provider(refreshToken: account.refreshToken)
        let error = await #expect(throws: CloudSyncError.self) { try await provider.get(["k"]) }
        #expect(error?.code == .notSignedIn)
        #expect(error?.message.contains("cloudsync login") == true)
        #expect(error?.message.contains(account.refreshToken) == false)
        #expect(await provider.availability().reason == .signedOut)
    }

    @Test func duplicatesByNameReadTheNewestAndAWriteDeletesTheOthers() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        host.files.addFile(user: account.user, name: "twin", content: Data("older".utf8))
        host.clock.advance(by: .seconds(5))
        host.files.addFile(user: account.user, name: "twin", content: Data("newer".utf8))
        host.clock.advance(by: .seconds(5))
        let provider = host.provider(refreshToken: account.refreshToken)
        #expect(try values(await provider.get(["twin"])) == ["newer"])
        #expect(provider.duplicatesResolved == 1)
        host.clearLog()
        #expect(succeeded(try await provider.set([KeyValue("twin", "newest")])))
        #expect(host.log.map(\.method) == ["PATCH", "DELETE"])
        let files = host.files.files(of: account.user)
        #expect(files.count == 1)
        #expect(files.first.map { String(decoding: $0.content, as: UTF8.self) } == "newest")
        // A listing shows the key once even while duplicates exist.
        host.files.addFile(user: account.user, name: "twin", content: Data("again".utf8))
        #expect(try await provider.listKeys(after: nil, limit: 10).keys == ["twin"])
    }

    @Test func aCachedIdThatIsGoneIsLookedUpOnceMore() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await provider.set([KeyValue("moved", "one")])))
        // Another device deletes it and writes it again: a new id.
        let other = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await other.remove(["moved"])))
        #expect(succeeded(try await other.set([KeyValue("moved", "two")])))
        host.clearLog()
        #expect(try values(await provider.get(["moved"])) == ["two"])
        #expect(host.log.map(\.status) == [404, 200, 200])
    }

    @Test func aLargeValueGoesUpResumablyAndSurvivesTwoInterruptions() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken, chunkSize: 1024 * 1024)
        let value = String(repeating: "0123456789abcdef", count: 6 * 1024 * 1024 / 16 + 7)
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: [2, 5], route: "PUT /upload/drive/v3/files")]))
        host.clearLog()
        #expect(succeeded(try await provider.set([KeyValue("big", value)])))
        let puts = host.log.filter { $0.method == "PUT" }
        let statusQueries = puts.filter { $0.headers["Content-Range"]?.hasPrefix("bytes */") == true }
        #expect(statusQueries.count == 2)
        #expect(puts.filter { $0.status == 503 }.count == 2)
        #expect(host.count("POST", "/upload/drive/v3/files", query: "uploadType") == 1)
        // Every chunk but the last is a multiple of 256 KiB; 7 chunks arrived, none twice.
        let chunks = puts.filter { $0.status != 503 && $0.headers["Content-Range"]?.hasPrefix("bytes */") == false }
        #expect(chunks.count == 7)
        #expect(chunks.dropLast().allSatisfy { $0.bodySize % 262_144 == 0 })
        host.server.server.clearFaultPlan()
        let fresh = host.provider(refreshToken: account.refreshToken)
        #expect(try values(await fresh.get(["big"])) == [value])
        // Updating it resumably replaces the content of the same file.
        #expect(succeeded(try await provider.set([KeyValue("big", value + "!")])))
        #expect(host.files.files(of: account.user).count == 1)
        #expect(try values(await fresh.get(["big"])) == [value + "!"])
    }

    @Test func anExpiredUploadSessionStartsTheUploadAgain() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken, chunkSize: 1024 * 1024)
        let value = String(repeating: "x", count: 5 * 1024 * 1024 + 1)
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(404, onCalls: [3], route: "PUT /upload/drive/v3/files")]))
        host.clearLog()
        #expect(succeeded(try await provider.set([KeyValue("big", value)])))
        #expect(host.count("POST", "/upload/drive/v3/files") == 2)
        #expect(host.files.files(of: account.user).map(\.content.count) == [value.utf8.count])
    }

    @Test func quotaIsUsageAndLimitAndNoLimitIsUnlimited() async throws {
        let unlimited = try DriveHost()
        let provider = unlimited.provider()
        #expect(succeeded(try await provider.set([KeyValue("a", "12345")])))
        #expect(try await provider.quota() == ProviderQuota(usedBytes: 5, totalBytes: nil))

        let limited = try DriveHost(storageLimitBytes: 8)
        let small = limited.provider()
        #expect(succeeded(try await small.set([KeyValue("a", "12345")])))
        #expect(try await small.quota() == ProviderQuota(usedBytes: 5, totalBytes: 8))
        let results = try await small.set([KeyValue("b", "12345")])
        guard case .failure(let error) = results.first else {
            Issue.record("a write past the limit succeeded")
            return
        }
        #expect(error.code == .quotaExceeded)
        #expect(!error.isRetryable)
        #expect(error.message.contains("storageQuotaExceeded"))
    }

    @Test func anotherAccountOnALaterRunIsAnIdentityChange() async throws {
        let host = try DriveHost()
        let state = ProviderState(provider: "drive", store: InMemoryProviderStateStore())
        let first = host.provider(refreshToken: host.signIn("alice@example.com").refreshToken, state: state)
        let alice = try await first.accountIdentity()
        #expect(alice == DriveFilesEmulator.permissionID(of: "alice@example.com"))
        #expect(try await first.accountIdentity() == alice)

        let second = host.provider(refreshToken: host.signIn("bob@example.com").refreshToken, state: state)
        let events = Mutex<[AccountEvent]>([])
        let subscription = second.subscribeToAccountChanges { event in events.withLock { $0.append(event) } }
        defer { subscription?.cancel() }
        #expect(succeeded(try await second.set([KeyValue("k", "v")])))
        let bob = try await second.accountIdentity()
        #expect(bob != alice)
        #expect(events.withLock { $0.map(\.identityChanged) } == [true])
        // The cache was cleared: the next read looks the key up again.
        host.clearLog()
        _ = try await second.get(["k"])
        #expect(host.log.count == 2)
    }

    @Test func rateLimitsAndServerErrorsAreRetriedAndThenMapped() async throws {
        let host = try DriveHost()
        let provider = host.provider(maxAttempts: 3)
        #expect(succeeded(try await provider.set([KeyValue("k", "v")])))
        host.server.server.setFaultPlan(HTTPFaultPlan([.errors(503, onCalls: [1], route: "GET /drive/v3/files/{id}")]))
        #expect(try values(await provider.get(["k"])) == ["v"])
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(429, onCalls: [1, 2, 3], route: "GET /drive/v3/files/{id}")]))
        let limited = try await provider.get(["k"])
        guard case .failure(let error) = limited.first else {
            Issue.record("three 429s in a row succeeded")
            return
        }
        #expect(error.code == .rateLimited)
        #expect(error.isRetryable)
    }

    @Test func driveErrorBodiesMapToTheStoresCodes() {
        func mapped(_ status: Int, _ reason: String) -> CloudSyncError {
            let body = Data(
                #"{"error":{"code":\#(status),"message":"m","errors":[{"domain":"usageLimits","reason":"\#(reason)","message":"m"}]}}"#
                    .utf8)
            return DriveErrorMapping.error(
                for: HTTPResponse(status: status, body: body),
                to: HTTPRequest(method: .get, url: URL(string: "https://www.googleapis.com/drive/v3/files")!))
        }
        #expect(mapped(403, "userRateLimitExceeded").code == .rateLimited)
        #expect(mapped(403, "rateLimitExceeded").code == .rateLimited)
        #expect(mapped(429, "rateLimitExceeded").code == .rateLimited)
        #expect(mapped(403, "storageQuotaExceeded").code == .quotaExceeded)
        #expect(mapped(403, "insufficientPermissions").code == .notSignedIn)
        #expect(mapped(403, "appNotAuthorizedToFile").code == .containerMisconfigured)
        #expect(mapped(401, "authError").code == .notSignedIn)
        #expect(mapped(500, "backendError").code == .server)
        #expect(mapped(404, "notFound").code == .provider)
    }

    @Test func a403RateLimitIsRetriedLikeA429() async throws {
        let calls = Mutex(0)
        let transport = TestTransport { request in
            let call = calls.withLock { value -> Int in
                value += 1
                return value
            }
            if call == 1 {
                return HTTPResponse(
                    status: 403,
                    body: Data(
                        #"{"error":{"code":403,"message":"Rate Limit Exceeded","errors":[{"reason":"userRateLimitExceeded"}]}}"#
                            .utf8))
            }
            return HTTPResponse(status: 200, body: Data(#"{"storageQuota":{"usage":"3"}}"#.utf8))
        }
        let provider = DriveProvider(
            endpoint: URL(string: "https://drive.test")!, authenticator: NoAuthentication(), transport: transport,
            context: ProviderContext(providerID: "drive"),
            retryPolicy: RetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1), maxDelay: .milliseconds(2)))
        #expect(try await provider.quota() == ProviderQuota(usedBytes: 3, totalBytes: nil))
        #expect(calls.withLock { $0 } == 2)
    }

    @Test func theChangeFeedNamesChangedAndRemovedKeys() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken)
        let start = try await provider.changes(since: nil)
        #expect(start.changed.isEmpty && start.removed.isEmpty)
        let other = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await other.set([KeyValue("a", "1"), KeyValue("b", "2")])))
        let first = try await provider.changes(since: start.cursor)
        #expect(Set(first.changed) == ["a", "b"])
        #expect(succeeded(try await other.set([KeyValue("a", "changed")])))
        #expect(succeeded(try await provider.remove(["b"])))
        let second = try await provider.changes(since: first.cursor)
        #expect(second.changed == ["a"])
        #expect(second.removed == ["b"])
        let quiet = try await provider.changes(since: second.cursor)
        #expect(quiet.changed.isEmpty && quiet.removed.isEmpty && quiet.cursor == second.cursor)
    }

    @Test func theSyncFeedReportsChangedKeysAndExpiresOnARemovalItCannotName() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        let provider = host.provider(refreshToken: account.refreshToken)
        let start = try #require(try await provider.changeFeedCursor())
        let other = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await other.set([KeyValue("a", "1"), KeyValue("b", "2")])))
        guard case .changes(let page) = try await provider.changes(since: start, limit: 100) else {
            Issue.record("the feed refused a fresh cursor")
            return
        }
        #expect(Set(page.changes) == [KeyChange(key: "a", removed: false), KeyChange(key: "b", removed: false)])
        #expect(!page.hasMore)
        // Drive names only the file id of a removal: a provider that never saw that file cannot say which key went.
        #expect(succeeded(try await other.remove(["b"])))
        let fresh = host.provider(refreshToken: account.refreshToken)
        guard case .expired(let reason) = try await fresh.changes(since: page.cursor, limit: 100) else {
            Issue.record("a removal without a name was not reported as expired")
            return
        }
        #expect(reason.contains("without their names"))
    }

    @Test func aRemoteChangeSubscriptionPollsTheFeedOnTheClock() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        #expect(host.provider(refreshToken: account.refreshToken).subscribeToRemoteChanges { _ in } == nil)
        let clock = ManualClock()
        let provider = host.provider(
            refreshToken: account.refreshToken, clock: clock, changePollInterval: .seconds(30))
        #expect(provider.capabilities.emitsRemoteChanges)
        let changes = Mutex<[RemoteChange]>([])
        let subscription = provider.subscribeToRemoteChanges { change in changes.withLock { $0.append(change) } }
        // Asleep for the interval, so its start token is taken: a sleeper alone may be the token request's deadline,
        // and a change made before the token is taken is never reported (as a loaded machine showed).
        try await clock.waitForSleeper(wakingIn: .seconds(30))
        let other = host.provider(refreshToken: account.refreshToken)
        #expect(succeeded(try await other.set([KeyValue("elsewhere", "1")])))
        clock.advance(by: .seconds(30))
        try await waitUntil { changes.withLock { $0.count } == 1 }
        #expect(changes.withLock { $0 } == [RemoteChange(provider: "drive", keys: ["elsewhere"])])
        // A quiet interval reports nothing; after cancel, nothing polls.
        try await clock.waitForSleepers(1)
        host.clearLog()
        clock.advance(by: .seconds(30))
        // The poll's request sleeps on the same clock for its deadline, so a sleeper alone does not say the poll is
        // done: wait for the request itself, then for the poller to sleep again.
        try await waitUntil { host.count("GET", "/drive/v3/changes") >= 1 }
        try await clock.waitForSleeper(wakingIn: .seconds(30))
        #expect(host.count("GET", "/drive/v3/changes") == 1)
        subscription?.cancel()
        try await waitUntil { clock.sleeperCount == 0 }
        #expect(clock.sleeperCount == 0)
        host.clearLog()
        clock.advance(by: .seconds(60))
        #expect(host.log.isEmpty)
        #expect(changes.withLock { $0.count } == 1)
    }

    @Test func aRejectedPageTokenRestartsTheListingAfterTheLastKey() async throws {
        let host = try DriveHost()
        let account = host.signIn()
        for number in 0..<30 {
            host.files.addFile(user: account.user, name: String(format: "k%02d", number), content: Data())
        }
        let provider = host.provider(refreshToken: account.refreshToken)
        let first = try await provider.listKeys(after: nil, limit: 10)
        host.files.expirePageTokens()
        var keys = first.keys
        var cursor = first.nextCursor
        while let next = cursor {
            let page = try await provider.listKeys(after: next, limit: 10)
            keys += page.keys
            cursor = page.nextCursor
        }
        #expect(keys == (0..<30).map { String(format: "k%02d", $0) })
        // Short pages from the server are followed too.
        host.files.pageSizeCap = 7
        let fresh = host.provider(refreshToken: account.refreshToken)
        #expect(try values(await fresh.get(["k03", "k29"])) == ["", ""])
    }
}
