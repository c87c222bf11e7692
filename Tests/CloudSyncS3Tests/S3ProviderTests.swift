import CloudSync
import CloudSyncBackup
import CloudSyncCrypto
import CloudSyncHTTP
import CloudSyncS3
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

/// One moto server for the whole test process; every test works under a prefix or bucket of its own.
///
/// The first test to ask starts it; the others await the same start. Waiting for it (moto takes seconds to start)
/// holds no thread of the concurrency pool.
enum SharedMoto {
    static let buckets = ["cloudsync-tests", "cloudsync-paging", "cloudsync-large", "cloudsync-rclone"]
    private static let starting = Task { try await MotoS3Server.start(repository: Repository.root, buckets: buckets) }

    static func server() async throws -> MotoS3Server { try await starting.value }

    static func endpoint() async throws -> URL { try await server().endpoint }
}

@Suite(.timeLimit(.minutes(10))) struct S3ProviderTests {
    @Test func conformsToTheProviderContract() async throws {
        let endpoint = try await SharedMoto.endpoint()
        let counter = Counter()
        let failures = await ProviderConformanceSuite.run {
            makeProvider(endpoint: endpoint, bucket: "cloudsync-tests", prefix: "conformance-\(counter.next())/")
        }
        #expect(failures.isEmpty, "\(failures)")
        let provider = makeProvider(endpoint: endpoint, bucket: "cloudsync-tests", prefix: "closed/", id: "bucket")
        await provider.close()
        let errors = await ProviderConformanceSuite.errorsAfterClose(provider)
        #expect(errors.allSatisfy { $0?.code == .closed && $0?.provider == "bucket" }, "\(errors)")
    }

    @Test func aBackupRepositoryLivesItsWholeLifeInABucket() async throws {
        let provider = makeProvider(
            endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: "backup/")
        let failures = await BackupRoundTrip.run(on: provider)
        #expect(failures.isEmpty, "\(failures)")
    }

    /// The backups issue's target: at most 10 requests per 1,000 small values backed up, the repository's lock,
    /// config, pack, index and snapshot included.
    @Test func aBackupOf1000SmallValuesCostsAtMostTenRequests() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "backup-requests/")
        // No store deadline: this counts requests, and a loaded suite has held moto's answer to a pack past 15 s.
        var options = StoreOptions()
        options.timeout = nil
        let store = try CloudStore(providers: [provider], options: options)
        let ring = try EnvelopeCodec(keys: [.raw(id: "k1", SecretBytes(copying: SecureRandom.bytes(count: 32)))])
        let items = (0..<1_000).map { KeyValue("app.key\($0)", String(repeating: "v", count: 100) + "\($0)") }
        proxy.server.clearLog()
        let repository = try await BackupRepository.open(in: store, provider: provider.id, codec: ring, create: true)
        try await repository.withLock(exclusive: false) { _ throws(CloudSyncError) in
            let session = repository.startBackup()
            try await session.add(items)
            _ = try await session.finish(source: "app", pipeline: "p", time: 1)
        }
        let requests = proxy.server.requestLog.map { "\($0.method) \($0.path)" }
        #expect(requests.count <= 10, "\(requests)")
    }

    /// ListObjectsV2 gives each object's Size, and the listing passes it on.
    @Test func aListingGivesEachObjectsSize() async throws {
        let provider = makeProvider(
            endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: "sized/")
        _ = try await provider.set([
            KeyValue("a", ""), KeyValue("b", "four"), KeyValue("c", String(repeating: "x", count: 5_000)),
        ])
        let page = try await provider.listKeys(after: nil, limit: 10)
        #expect(page.keys == ["a", "b", "c"])
        #expect(page.sizes == [0, 4, 5_000])
        // LastModified, by the server's clock: the day of the test, give or take one.
        let today = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(page.modified?.allSatisfy { $0.map { abs($0 - today) < 86_400_000 } ?? false } == true)
    }

    @Test func listsAndRemoves2500KeysInPagesOf1000() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-paging", prefix: "many/")
        let keys = (0..<2500).map { String(format: "key-%05d", $0) }
        for start in stride(from: 0, to: keys.count, by: 1000) {
            let results = try await provider.set(keys[start..<min(start + 1000, keys.count)].map { KeyValue($0, "v") })
            #expect(results.allSatisfy { (try? $0.get()) != nil })
        }
        proxy.server.clearLog()
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await provider.listKeys(after: cursor, limit: 1000)
            seen += page.keys
            cursor = page.nextCursor
            pages += 1
        } while cursor != nil && pages < 10
        #expect(pages == 3)
        #expect(seen == keys)
        #expect(proxy.count("GET", query: "list-type") == 3)
        let listing = proxy.server.requestLog.map { $0.queryItems }
        #expect(listing.allSatisfy { $0.contains(URLQueryItem(name: "encoding-type", value: "url")) })

        proxy.server.clearLog()
        var removed: [Result<Void, CloudSyncError>] = []
        for start in stride(from: 0, to: keys.count, by: 1000) {
            removed += try await provider.remove(Array(keys[start..<min(start + 1000, keys.count)]))
        }
        #expect(removed.count == 2500 && removed.allSatisfy { (try? $0.get()) != nil })
        #expect(proxy.count("POST", query: "delete") == 3)
        #expect(proxy.server.requestLog.count == 3)
        let md5 = proxy.server.requestLog.compactMap { $0.headers["Content-MD5"] }
        #expect(md5.count == 3)
        let empty = try await provider.listKeys(after: nil, limit: 1000)
        #expect(empty.keys.isEmpty && empty.nextCursor == nil)
    }

    static let oddKeys = [
        "with space", "plus+sign", "percent%20not-an-escape", "100%", "ключ/日本語/🌍", "double//slash",
        "trailing/", "./dot/../segments", "a=b&c?d#e", "tilde~", "(parens)!*'", "semi;colon:at@", "tab\there",
        "quote\"s <xml> & 'apos'", "+leading-plus", "back\\slash",
    ]

    @Test func oddKeysRoundTripThroughSetGetListAndRemove() async throws {
        let provider = makeProvider(
            endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: "odd keys/ü+/")
        let items = Self.oddKeys.map { KeyValue($0, "value of \($0)") }
        let stored = try await provider.set(items)
        #expect(stored.allSatisfy { (try? $0.get()) != nil }, "\(stored)")
        let read = try await provider.get(Self.oddKeys).map { try $0.get() }
        #expect(read == items.map(\.value))
        let listed = try await provider.listKeys(after: nil, limit: 1000)
        #expect(Set(listed.keys) == Set(Self.oddKeys))
        #expect(listed.keys == listed.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        let removed = try await provider.remove(Self.oddKeys)
        #expect(removed.allSatisfy { (try? $0.get()) != nil }, "\(removed)")
        #expect(try await provider.listKeys(after: nil, limit: 1000).keys.isEmpty)
        #expect(try await provider.get(Self.oddKeys).allSatisfy { (try? $0.get()) == .some(nil) })
    }

    @Test func aValueOver64MiBGoesUpInPartsAndReadsBack() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-large", prefix: "big/")
        let unit = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_=+!@#$%^&*()[]{};:,.<>/?|\n"
        let value = String(repeating: unit, count: 70 * 1024 * 1024 / unit.utf8.count + 1)
        #expect(value.utf8.count > 70 * 1024 * 1024)
        let started = ContinuousClock.now
        let stored = try await provider.set([KeyValue("archive", value)])
        let uploaded = ContinuousClock.now - started
        try stored[0].get()
        #expect(proxy.count("POST", query: "uploads") == 1)
        #expect(proxy.count("PUT", query: "partNumber") == 5)
        #expect(proxy.count("POST", query: "uploadId") == 1)
        let back = try await provider.get(["archive"])[0].get()
        let total = ContinuousClock.now - started
        #expect(back?.utf8.count == value.utf8.count)
        #expect(back == value)
        print("70 MiB multipart through a loopback proxy to moto: upload \(uploaded), upload + download \(total)")
        _ = try await provider.remove(["archive"])
    }

    @Test func aMissingBucketIsAMisconfiguredContainerNamingIt() async throws {
        let provider = makeProvider(endpoint: try await SharedMoto.endpoint(), bucket: "no-such-bucket", id: "backup")
        await #expect {
            _ = try await provider.get(["k"])
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .containerMisconfigured && error?.provider == "backup"
                && error?.message.contains("no-such-bucket") == true && error?.message.contains("NoSuchBucket") == true
        }
        await #expect(throws: CloudSyncError.self) { _ = try await provider.set([KeyValue("k", "v")]) }
        let availability = await provider.availability()
        #expect(availability.reason == .misconfigured, "\(availability)")
        #expect(availability.description.contains("no-such-bucket"))
    }

    @Test func eachKeyOfABatchThatFailedAsAWholeCarriesItsOwnFailure() async throws {
        // Nothing listens on port 1 of the loopback address: every request of the batch is refused.
        let bucket = makeProvider(
            endpoint: URL(string: "http://127.0.0.1:1")!, bucket: "backups", id: "bucket", maxAttempts: 1)
        let keys = ["prefs.font.size", "prefs.lang", "prefs.theme"]
        let seed = MemoryProvider(id: "seed")
        _ = try await seed.set(keys.map { KeyValue($0, "v") })
        // No store deadline: on a loaded machine the refusals may come late, and this is about what they say.
        var options = StoreOptions()
        options.timeout = nil
        let store = try CloudStore(providers: [seed], attached: [bucket], options: options)
        let result = try await store.maintenance.migrate(from: "seed", to: "bucket")
        #expect(result.copied.isEmpty)
        #expect(result.failed.map(\.key) == keys)
        for failure in result.failed {
            #expect(failure.error.key == failure.key)
            #expect(failure.error.code == .offline)
            #expect(failure.error.message.hasPrefix("could not reach 127.0.0.1:1 "), "\(failure.error)")
            // No key's failure speaks of another key's request.
            #expect(!failure.error.message.contains("prefs."), "\(failure.error)")
        }
        await #expect {
            _ = try await bucket.set([KeyValue("a", "v"), KeyValue("b", "v")])
        } throws: { error in
            // Thrown for the whole batch, the error names no key.
            (error as? CloudSyncError)?.key == nil && (error as? CloudSyncError)?.provider == "bucket"
        }
    }

    @Test func slowDownIsRetriedAndWhenItPersistsIsRateLimited() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let metrics = ProviderMetrics()
        let provider = makeProvider(
            endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "slow/", metrics: metrics, maxAttempts: 3)
        let calls = Counter()
        proxy.intercept { request in
            request.method == "PUT" && calls.next() < 2
                ? s3Error(503, "SlowDown", "Please reduce your request rate.") : nil
        }
        let stored = try await provider.set([KeyValue("k", "v")])
        try stored[0].get()
        #expect(proxy.count("PUT") == 3)
        #expect(metrics.reading.retries == 2)
        #expect(try await provider.get(["k"])[0].get() == "v")

        proxy.intercept { request in
            request.method == "PUT" ? s3Error(503, "SlowDown", "Please reduce your request rate.") : nil
        }
        let failed = try await provider.set([KeyValue("k", "w")])
        #expect(throws: CloudSyncError.self) { try failed[0].get() }
        if case .failure(let error) = failed[0] {
            #expect(error.code == .rateLimited && error.isRetryable && error.key == "k", "\(error)")
        }
    }

    @Test func connectionResetsMidBodyAreRetried() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "resets/")
        _ = try await provider.set([KeyValue("k", String(repeating: "x", count: 100_000))])
        proxy.server.clearLog()
        proxy.server.setFaultPlan(HTTPFaultPlan([.resetMidBody(on: .calls([1, 2]))]))
        let read = try await provider.get(["k"])
        #expect(try read[0].get()?.count == 100_000)
        #expect(proxy.server.requestLog.count == 3)
        proxy.server.setFaultPlan(HTTPFaultPlan([.resetMidBody(on: .calls([1]))]))
        let removed = try await provider.remove(["k"])
        #expect(removed.allSatisfy { (try? $0.get()) != nil })
        #expect(try await provider.get(["k"])[0].get() == nil)
    }

    @Test(arguments: [
        ("InvalidAccessKeyId", 403, ErrorCode.notSignedIn, "does not know access key AKIATESTKEY"),
        ("SignatureDoesNotMatch", 403, .notSignedIn, "wrong or rotated secret access key"),
        ("AccessDenied", 403, .containerMisconfigured, "may not use the bucket cloudsync-tests"),
        ("EntityTooLarge", 400, .payloadTooLarge, "refused the value as too large"),
        ("ExpiredToken", 400, .notSignedIn, "temporary credentials expire"),
    ])
    func s3ErrorsMapToTheStoresCodes(code: String, status: Int, expected: ErrorCode, words: String) async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "errors/")
        proxy.intercept { _ in s3Error(status, code, "server text") }
        var caught: CloudSyncError?
        do {
            let results = try await provider.set([KeyValue("k", "v")])
            if case .failure(let error) = results[0] { caught = error }
        } catch {
            caught = error as? CloudSyncError
        }
        #expect(caught?.code == expected, "\(String(describing: caught))")
        #expect(caught?.message.contains(words) == true, "\(String(describing: caught))")
        #expect(caught?.message.contains("test/secret+key") == false)
    }

    /// A server that refuses one key's request (here its signature, as one that resolves the key's `..` segment
    /// before checking it would) while it takes the others: that key fails alone, the written keys are reported
    /// written, and the message does not blame the secret (the whole batch was reported failed as a wrong secret).
    @Test func oneKeysRefusalIsThatKeysFailureNotTheBatchs() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "one-refused/")
        proxy.intercept { request in
            request.method == "PUT" && request.path.hasSuffix("/a/%2E%2E/b")
                ? s3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match") : nil
        }
        let keys = (0..<40).map { "k\($0)" } + ["a/../b"]
        let results = try await provider.set(keys.map { KeyValue($0, "v") })
        #expect(results.dropLast().allSatisfy { (try? $0.get()) != nil })
        guard case .failure(let refused) = results.last else {
            Issue.record("the refused key was reported written")
            return
        }
        #expect(refused.code == .provider && refused.key == "a/../b", "\(refused)")
        #expect(refused.message.contains("reads this key's path otherwise than it was signed"), "\(refused.message)")
        #expect(!refused.message.contains("secret access key"))
        #expect(try await provider.get(["k0", "k39"]).map { try $0.get() } == ["v", "v"])
        // Refused alone, with nothing else in the batch, it is the credentials' failure as before.
        let alone = await #expect(throws: CloudSyncError.self) { try await provider.set([KeyValue("a/../b", "v")]) }
        #expect(alone?.code == .notSignedIn)
    }

    @Test func perKeyErrorsOfDeleteObjectsLandInTheirSlots() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "per-key/")
        proxy.intercept { request in
            guard request.method == "POST" else { return nil }
            return HTTPResponse(
                status: 200, headers: ["Content-Type": "application/xml"],
                body: Data(
                    (#"<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#
                        + "<Error><Key>per-key/b &amp; c</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                        + "<Error><Key>per-key/d</Key><Code>InternalError</Code><Message>try again</Message></Error>"
                        + "</DeleteResult>").utf8))
        }
        let results = try await provider.remove(["a", "b & c", "d"])
        #expect((try? results[0].get()) != nil)
        guard case .failure(let denied) = results[1], case .failure(let failed) = results[2] else {
            Issue.record("per-key errors were not reported: \(results)")
            return
        }
        #expect(denied.code == .containerMisconfigured && denied.key == "b & c" && denied.provider == "bucket")
        #expect(failed.code == .server && failed.key == "d" && failed.message.contains("InternalError: try again"))
    }

    @Test func a404ThatIsNotS3sNoSuchKeyIsAnErrorNotAnAbsentKey() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "not-s3/")
        proxy.intercept { _ in HTTPResponse.text(404, "<html>Not Found</html>") }
        let results = try await provider.get(["k"])
        #expect(throws: CloudSyncError.self) { try results[0].get() }
    }

    @Test func aSkewedClockIsNamedWithTheDifference() async throws {
        let proxy = try S3Proxy(upstream: try await SharedMoto.endpoint())
        let provider = makeProvider(endpoint: proxy.endpoint, bucket: "cloudsync-tests", prefix: "skew/")
        proxy.intercept { _ in
            s3Error(
                403, "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
                extra: "<RequestTime>20260101T003000Z</RequestTime><ServerTime>2026-01-01T00:00:00Z</ServerTime>"
                    + "<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>")
        }
        await #expect {
            _ = try await provider.get(["k"])
        } throws: { error in
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn && error?.message.contains("1800 s ahead of the server's") == true
        }
    }

    @Test func virtualHostedAddressingPutsTheBucketInTheHostName() async throws {
        let moto = try await SharedMoto.server()
        // libcurl resolves every *.localhost name to the loopback address itself, so no DNS is needed.
        let endpoint = URL(string: "http://localhost:\(moto.port)")!
        let provider = makeProvider(endpoint: endpoint, bucket: "cloudsync-tests", prefix: "virtual/", pathStyle: false)
        #expect(
            provider.location.url(objectKey: "virtual/k").absoluteString
                == "http://cloudsync-tests.localhost:\(moto.port)/virtual/k")
        _ = try await provider.set([KeyValue("k", "hosted")])
        let pathStyle = makeProvider(endpoint: moto.endpoint, bucket: "cloudsync-tests", prefix: "virtual/")
        #expect(try await pathStyle.get(["k"])[0].get() == "hosted")
        #expect(try await provider.listKeys(after: nil, limit: 10).keys == ["k"])
        _ = try await provider.remove(["k"])
    }

    @Test func identityNamesTheBucketEndpointAndKeyButNoSecretAndQuotaIsNone() async throws {
        let provider = makeProvider(endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests")
        let identity = try await provider.accountIdentity()
        #expect(identity?.contains("cloudsync-tests") == true && identity?.contains("AKIATESTKEY") == true)
        #expect(identity?.contains("test/secret") == false)
        #expect(try await provider.quota() == nil)
        #expect(!provider.capabilities.reportsQuota)
    }

    @Test func theSecretNeverReachesTheRequestLog() async throws {
        let lines = Mutex<[String]>([])
        let logger = ProviderLogger(minimumLevel: .debug) { _, line in lines.withLock { $0.append(line) } }
        let provider = makeProvider(
            endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-tests", prefix: "log/", logger: logger)
        _ = try await provider.set([KeyValue("k", "v")])
        _ = try await provider.get(["k"])
        let text = lines.withLock { $0.joined(separator: "\n") }
        #expect(text.contains("PUT /cloudsync-tests/log/k"))
        #expect(!text.contains("test/secret+key") && !text.contains("Signature="))
    }

    @Test func prefixAndKeyAreLimitedTo1024Bytes() {
        let provider = makeProvider(endpoint: URL(string: "http://127.0.0.1:1")!, bucket: "b", prefix: "12345/")
        #expect(provider.capabilities.keyRules == [.maxUTF8Bytes(1018)])
        #expect(provider.capabilities.batchLimit == 1000)
    }
}
