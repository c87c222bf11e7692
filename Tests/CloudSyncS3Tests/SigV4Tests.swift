import CloudSyncHTTP
import CloudSyncS3
import CloudSyncSodium
import CloudSyncTesting
import Foundation
import Testing

@Suite struct SigV4Tests {
    // AWS's signature test suite (2015-08-30, service "service"): requests without x-amz-content-sha256.
    static let suiteCredentials = S3Credentials(
        accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    static let suiteTime: Int64 = 1_440_938_160_000

    static func suite(_ method: String, _ url: String) -> SigV4.Signature {
        SigV4.sign(
            method: method, url: URL(string: url)!,
            headers: ["Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"],
            payloadHash: SigV4.emptyPayloadHash, credentials: suiteCredentials, region: "us-east-1",
            service: "service", timeMilliseconds: suiteTime, contentHashHeader: false)
    }

    @Test(arguments: [
        ("GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        (
            "GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1",
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        ),
        ("POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        (
            "GET", "https://example.amazonaws.com/%E1%88%B4",
            "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"
        ),
    ])
    func awsSignatureTestSuite(method: String, url: String, signature: String) {
        let signed = Self.suite(method, url)
        #expect(signed.signature == signature)
        #expect(
            signed.headers["Authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, Signature=\(signature)")
    }

    @Test func getVanillaCanonicalRequestHashesToThePublishedValue() {
        let signed = Self.suite("GET", "https://example.amazonaws.com/")
        #expect(
            signed.canonicalRequest
                == "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
                + SigV4.emptyPayloadHash)
        #expect(
            signed.stringToSign.hasSuffix("\nbb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"))
    }

    // The S3 API reference's header-authentication examples (2013-05-24, bucket examplebucket).
    static let s3Credentials = S3Credentials(
        accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")

    static func s3Example(_ method: String, _ path: String, headers: HTTPHeaders = [:], payloadHash: String)
        -> SigV4.Signature
    {
        SigV4.sign(
            method: method, url: URL(string: "https://examplebucket.s3.amazonaws.com" + path)!, headers: headers,
            payloadHash: payloadHash, credentials: s3Credentials, region: "us-east-1",
            timeMilliseconds: 1_369_353_600_000)
    }

    @Test func s3GetObjectExample() {
        let signed = Self.s3Example(
            "GET", "/test.txt", headers: ["Range": "bytes=0-9"], payloadHash: SigV4.emptyPayloadHash)
        #expect(signed.signedHeaders == "host;range;x-amz-content-sha256;x-amz-date")
        #expect(signed.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(signed.headers["x-amz-content-sha256"] == SigV4.emptyPayloadHash)
        #expect(signed.headers["x-amz-date"] == "20130524T000000Z")
    }

    @Test func s3PutObjectExampleWithAnEncodedKeyAndABody() {
        let body = Array("Welcome to Amazon S3.".utf8)
        let hash = Hex.encode(SHA256.hash(body))
        #expect(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let signed = Self.s3Example(
            "PUT", "/" + S3URIEncoding.path("test$file.text"),
            headers: ["Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"],
            payloadHash: hash)
        #expect(signed.canonicalRequest.hasPrefix("PUT\n/test%24file.text\n\n"))
        #expect(signed.signedHeaders == "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class")
        #expect(signed.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    @Test func s3BucketExamplesWithQueries() {
        let lifecycle = Self.s3Example("GET", "/?lifecycle", payloadHash: SigV4.emptyPayloadHash)
        #expect(lifecycle.canonicalRequest.hasPrefix("GET\n/\nlifecycle=\n"))
        #expect(lifecycle.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
        let list = Self.s3Example("GET", "/?prefix=J&max-keys=2", payloadHash: SigV4.emptyPayloadHash)
        #expect(list.canonicalRequest.hasPrefix("GET\n/\nmax-keys=2&prefix=J\n"))
        #expect(list.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test func aSessionTokenIsSentAndSigned() {
        var credentials = Self.s3Credentials
        credentials.sessionToken = "session-token-value"
        let signed = SigV4.sign(
            method: "GET", url: URL(string: "http://127.0.0.1:9000/bucket/key")!, headers: [:],
            payloadHash: SigV4.emptyPayloadHash, credentials: credentials, region: "us-east-1", timeMilliseconds: 0)
        #expect(signed.headers["x-amz-security-token"] == "session-token-value")
        #expect(signed.signedHeaders == "host;x-amz-content-sha256;x-amz-date;x-amz-security-token")
        #expect(signed.canonicalRequest.contains("\nhost:127.0.0.1:9000\n"))
        #expect(!credentials.description.contains("wJalr") && !credentials.description.contains("session-token"))
    }

    @Test(arguments: [
        (Int64(0), "19700101T000000Z"), (1_369_353_600_000, "20130524T000000Z"),
        (1_709_251_199_999, "20240229T235959Z"), (951_782_400_000, "20000229T000000Z"),
    ])
    func timestamps(milliseconds: Int64, text: String) {
        #expect(SigV4.timestamps(milliseconds: milliseconds).date == text)
        #expect(SigV4.timestamps(milliseconds: milliseconds).day == String(text.prefix(8)))
    }

    @Test func keysAreEncodedOnceSegmentBySegment() {
        #expect(S3URIEncoding.path("a b/c+d/100%/ü") == "a%20b/c%2Bd/100%25/%C3%BC")
        #expect(S3URIEncoding.path("a//b/") == "a//b/")
        #expect(S3URIEncoding.path("./x/../y") == "%2E/x/%2E%2E/y")
        #expect(S3URIEncoding.encode("A-z_0.9~/=&?#") == "A-z_0.9~%2F%3D%26%3F%23")
    }
}

/// The same requests signed here and by botocore's S3 signer (PyPI), an independent implementation.
@Suite(.timeLimit(.minutes(10))) struct SigV4BotocoreTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build/pyenv/bin/python3").path
    static let script = root.appendingPathComponent("scripts/sigv4_botocore.py").path

    struct Case {
        var method: String
        var url: String
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var sessionToken: String?
        var region = "us-east-1"
    }

    static let oddKeys = [
        "with space", "plus+sign", "100%", "ключ/日本語/🌍", "double//slash", "trailing/", "a=b&c?d#e",
        "tilde~dash-under_score.dot", "(parens)!*'", "semi;colon:at@", "tab\there",
    ]

    static var cases: [Case] {
        var cases: [Case] = []
        for (index, key) in oddKeys.enumerated() {
            let path = "/bucket/prefix/" + S3URIEncoding.path(key)
            let body = Array("value of \(key)".utf8)
            cases.append(Case(method: "GET", url: "http://127.0.0.1:9000" + path))
            cases.append(
                Case(
                    method: "PUT", url: "https://bucket.s3.eu-west-1.amazonaws.com/" + S3URIEncoding.path(key),
                    headers: [("Content-Type", "application/octet-stream"), ("Content-MD5", "mZ9xyzAbC+/=")],
                    body: body, sessionToken: index.isMultiple(of: 2) ? "FQoGZXIvYXdzEJr//token+with/odd=" : nil,
                    region: "eu-west-1"))
            cases.append(Case(method: "DELETE", url: "http://localhost:9000" + path, sessionToken: "t"))
        }
        let token = S3URIEncoding.encode("1/abc+def=ghi==")
        cases += [
            Case(
                method: "GET",
                url: "http://127.0.0.1:9000/bucket?list-type=2&prefix=\(S3URIEncoding.encode("pre fix/ü+"))"
                    + "&continuation-token=\(token)&encoding-type=url&max-keys=1000"),
            Case(
                method: "POST", url: "http://127.0.0.1:9000/bucket?delete",
                headers: [("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="), ("Content-Type", "application/xml")],
                body: Array("<Delete><Object><Key>a</Key></Object></Delete>".utf8)),
            Case(method: "POST", url: "http://127.0.0.1:9000/bucket/big?uploads"),
            Case(
                method: "PUT",
                url: "http://127.0.0.1:9000/bucket/big?uploadId=\(S3URIEncoding.encode("2~abc+def/"))&partNumber=3",
                body: [UInt8](repeating: 0x61, count: 10_000)),
            Case(
                method: "HEAD", url: "https://s3.amazonaws.com/bucket/key",
                headers: [("X-Amz-Meta-Note", "  two   spaces ")]),
            Case(method: "GET", url: "http://127.0.0.1:9000/bucket/key", region: "auto"),
        ]
        return cases
    }

    @Test func cloudSyncAndBotocoreSignIdentically() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the Python test environment is missing: run `make test` (scripts/python-env.sh) first")
            return
        }
        let cases = Self.cases
        let time: Int64 = 1_767_225_600  // 2026-01-01T00:00:00Z
        let input: [[String: Any]] = cases.map { item in
            [
                "method": item.method, "url": item.url, "headers": item.headers.map { [$0.0, $0.1] },
                "body": Data(item.body).base64EncodedString(), "accessKeyId": "AKIAODDKEY",
                "secretAccessKey": "se/cret+key=", "sessionToken": item.sessionToken as Any,
                "region": item.region, "time": time,
            ]
        }
        let directory = try TemporaryDirectory()
        let requests = directory.file("requests.json")
        try JSONSerialization.data(withJSONObject: input).write(to: URL(fileURLWithPath: requests))
        let result = try await ProcessRunner.run(
            "/bin/sh", ["-c", "\"$0\" \"$1\" < \"$2\"", Self.python, Self.script, requests])
        try #require(result.status == 0, "\(result.standardError)")
        let output = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [[String: Any]])
        try #require(output.count == cases.count)
        for (item, theirs) in zip(cases, output) {
            let ours = SigV4.sign(
                method: item.method, url: URL(string: item.url)!,
                headers: HTTPHeaders(item.headers.map { (name: $0.0, value: $0.1) }),
                payloadHash: Hex.encode(SHA256.hash(item.body)),
                credentials: S3Credentials(
                    accessKeyID: "AKIAODDKEY", secretAccessKey: "se/cret+key=", sessionToken: item.sessionToken),
                region: item.region, timeMilliseconds: time * 1000)
            #expect(ours.canonicalRequest == theirs["canonicalRequest"] as? String, "\(item.method) \(item.url)")
            #expect(ours.headers["Authorization"] == theirs["authorization"] as? String, "\(item.method) \(item.url)")
            let headers = theirs["headers"] as? [String: String] ?? [:]
            #expect(ours.headers["x-amz-content-sha256"] == headers["x-amz-content-sha256"])
            #expect(ours.headers["x-amz-security-token"] == headers["x-amz-security-token"])
        }
    }
}
