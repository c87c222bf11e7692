import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync serve` as an attacker meets it: hostile heads, bodies and chunk sizes (`scripts/http_abuse.py`, raw
/// sockets), each on a connection of its own, and after each the process still answers `/healthz`; bodies of a GiB
/// refused before they are read; TLS and IPv6 listeners.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ServeHostileClientTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let python = root + "/.build/pyenv/bin/python3"
    static let token = "a-long-enough-secret-for-tests"

    /// A served pipeline (no schedule: nothing runs unless asked) and its token file.
    struct Served {
        let directory: TemporaryDirectory
        let file: String
        let tokenFile: String

        init() throws {
            directory = try TemporaryDirectory()
            try directory.fill("seed", count: 2)
            file = directory.file("p.yaml")
            try PipelineText.directoryCopy(name: "p", source: "seed", destination: "out")
                .write(toFile: file, atomically: true, encoding: .utf8)
            tokenFile = directory.file("token")
            _ = FileManager.default.createFile(
                atPath: tokenFile, contents: Data(ServeHostileClientTests.token.utf8),
                attributes: [.posixPermissions: 0o600])
        }

        /// Starts `cloudsync serve` on a port of loopback; with `token`, every request but /healthz needs it.
        func start(token: Bool = true, _ extra: [String] = []) async throws -> (RunningProcess, URL) {
            let process = try RunningProcess(
                try ProcessRunner.builtProduct("cloudsync"),
                ["serve", file, "--listen", "127.0.0.1:0"] + (token ? ["--token-file", tokenFile] : []) + extra)
            let url = try #require(await process.servingURL(), "serve did not start")
            return (process, url)
        }
    }

    static func abuse(_ arguments: [String]) async throws -> [String: Any] {
        let result = try await ProcessRunner.run(python, [root + "/scripts/http_abuse.py"] + arguments)
        return try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
            "http_abuse.py \(arguments): \(result.standardOutput)\(result.standardError)")
    }

    /// The peak resident memory of `pid` in bytes, as the kernel counted it (VmHWM).
    static func peakMemory(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])) * 1024
    }

    /// The answer each hostile request must get: the status, or 0 for a connection closed without one (a chunked
    /// body that grows past the limit cannot be answered mid-body); nil where any answer will do, so long as the
    /// process lives (libmicrohttpd's own choices on inputs no client sends).
    static let expected: [String: Int?] = [
        "chunk-ffffffffffffffffff": 413, "chunk-negative": 400, "chunk-plus": 400, "chunk-no-crlf": 400,
        "chunks-past-64k": 0, "content-length-1.5g": 413, "content-length-overflow": 413,
        "content-length-negative": 400, "content-length-plus": 400, "content-length-twice-differing": 400,
        "content-length-and-chunked": 400, "transfer-encoding-gzip": 501, "head-17k": 431, "head-70k": 431,
        "head-1m-no-end": 431, "many-headers": 431, "target-20k": 431, "http-9": 505, "expect-continue-huge": 413,
        "header-without-colon": 400, "pipelined-100": 200,
    ]

    /// Without a token, so every request reaches the limits and the API rather than stopping at the 401.
    @Test func everyHostileRequestLeavesServeAnsweringAndGetsItsStatus() async throws {
        let served = try Served()
        let (process, url) = try await served.start(token: false)
        let figures = try await Self.abuse(["cases", url.absoluteString])
        let cases = try #require(figures["cases"] as? [[String: Any]])
        #expect(cases.count >= 30)
        for entry in cases {
            let name = entry["name"] as? String ?? "?"
            #expect(entry["health"] as? Int == 200, "serve stopped answering /healthz after \(name): \(entry)")
            if let wanted = Self.expected[name], let status = wanted {
                #expect(entry["answer"] as? Int == status, "\(name): \(entry)")
                if status >= 400 { #expect(entry["closed"] as? Bool == true, "\(name) left its connection open") }
            }
        }
        // What an operator's Prometheus sees of it: the refusals by status, in text promtool accepts.
        let metrics = try await ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "curl -s --max-time 10 \"$0\" | tee /dev/stderr | promtool check metrics",
                url.absoluteString + "metrics",
            ])
        #expect(metrics.status == 0, "\(metrics.standardOutput)\(metrics.standardError.suffix(2000))")
        for status in [413, 431, 501] {
            #expect(
                metrics.standardError.contains("cloudsync_serve_http_refused_total{status=\"\(status)\"} "),
                "no refusals with \(status) counted")
        }
        #expect(metrics.standardError.contains("cloudsync_serve_http_requests_total "))
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)
    }

    @Test func twentyBodiesOfAGiBAreRefusedBeforeTheyAreReadAndMemoryStaysSmall() async throws {
        let served = try Served()
        let (process, url) = try await served.start()
        // Declared: refused on the head (401 for want of the token, or 413 for the length), nothing of it read.
        let declared = try await Self.abuse(["bodies", url.absoluteString, "--count", "20"])
        let answers = try #require(declared["answers"] as? [String: Int])
        // A client still sending when the answer comes may lose it to the reset the server's close causes (the
        // server closes with body bytes unread, and a reset discards what the client had not yet read): "reset".
        #expect(answers.keys.allSatisfy { ["401", "413", "reset"].contains($0) }, "\(declared)")
        #expect(answers["401", default: 0] + answers["413", default: 0] > 0, "\(declared)")
        #expect(answers.values.reduce(0, +) == 20)
        // Only what the sockets' buffers took before the answer came: far from the GiB each wanted to send.
        #expect((declared["sentMax"] as? Int ?? .max) < 32 << 20, "\(declared)")
        #expect(try Self.peakMemory(process.pid) < 100 << 20)
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)

        // Streamed in chunks to a server that wants no token, so the body is read: its connection ends once 64 KiB
        // are past.
        let (open, openURL) = try await served.start(token: false)
        let streamed = try await Self.abuse(["bodies", openURL.absoluteString, "--count", "20", "--chunked"])
        #expect((streamed["sentMax"] as? Int ?? .max) < 32 << 20, "\(streamed)")
        #expect(try Self.peakMemory(open.pid) < 100 << 20)
        open.signal(SIGTERM)
        #expect(await open.exited().status == 0)
    }

    @Test func theTokenIsCheckedOnTheHeadWithoutWaitingForTheBody() async throws {
        let served = try Served()
        let (process, url) = try await served.start()
        // A head that promises a body and never sends it: the 401 comes at once, not after an idle timeout.
        let started = ContinuousClock.now
        let result = try await ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/stdout", "-w", "%{http_code}", "--max-time", "20", "-X", "POST", "-H",
                "Content-Length: 1000", "-H", "Expect:", url.absoluteString + "api/pipelines/p/run",
            ])
        #expect(result.standardOutput.hasSuffix("401"), "\(result.standardOutput)\(result.standardError)")
        #expect(ContinuousClock.now - started < .seconds(15))
        process.signal(SIGTERM)
        _ = await process.exited()
    }

    @Test func tlsWithACertificateAndKeyFromFilesServesHTTPSOnly() async throws {
        let served = try Served()
        let key = served.directory.file("key.pem")
        let certificate = served.directory.file("cert.pem")
        let made = try await ProcessRunner.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key,
                "-out", certificate,
            ])
        #expect(made.status == 0, "\(made.standardError)")
        // A key others can read is refused before anything listens.
        chmod(key, 0o644)
        let loose = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"),
            ["serve", served.file, "--tls-cert", certificate, "--tls-key", key])
        #expect(loose.status == 64)
        #expect(loose.standardError.contains("--tls-key \(key) can be read by others"))
        chmod(key, 0o600)
        // A key that is not the certificate's: libmicrohttpd refuses to start TLS, and serve says what to check.
        let otherKey = served.directory.file("other-key.pem")
        _ = try await ProcessRunner.run(
            "/usr/bin/openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", otherKey])
        chmod(otherKey, 0o600)
        let mismatched = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"),
            ["serve", served.file, "--listen", "127.0.0.1:0", "--tls-cert", certificate, "--tls-key", otherKey])
        #expect(mismatched.status == 64, "\(mismatched.standardError)")
        #expect(mismatched.standardError.contains("the certificate and key are PEM and belong together"))
        let half = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), ["serve", served.file, "--tls-cert", certificate])
        #expect(half.status == 64 && half.standardError.contains("--tls-cert needs --tls-key"))

        let (process, url) = try await served.start(["--tls-cert", certificate, "--tls-key", key])
        #expect(url.scheme == "https")
        let secure = try await ProcessRunner.run(
            "/usr/bin/curl", ["-s", "--cacert", certificate, "--max-time", "10", url.absoluteString + "healthz"])
        #expect(secure.standardOutput == #"{"status":"ok"}"#, "\(secure.standardError)")
        let authorized = try await ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-s", "--cacert", certificate, "--max-time", "10", "-H", "Authorization: Bearer \(Self.token)",
                url.absoluteString + "api/pipelines",
            ])
        #expect(authorized.standardOutput.contains(#""name":"p""#), "\(authorized.standardOutput)")
        // Plain HTTP on the TLS port gets no answer, and the process goes on.
        let plain = try await ProcessRunner.run(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/stdout", "-w", "%{http_code}", "--max-time", "5",
                "http://127.0.0.1:\(url.port!)/healthz",
            ])
        #expect(!plain.standardOutput.contains("status"))
        let again = try await ProcessRunner.run(
            "/usr/bin/curl", ["-s", "--cacert", certificate, "--max-time", "10", url.absoluteString + "healthz"])
        #expect(again.standardOutput == #"{"status":"ok"}"#)
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)
    }

    @Test func anIPv6LoopbackListenerNeedsNoTokenAndAnswers() async throws {
        let served = try Served()
        let process = try RunningProcess(
            try ProcessRunner.builtProduct("cloudsync"), ["serve", served.file, "--listen", "[::1]:0"])
        let url = try #require(await process.servingURL(), "serve did not start on [::1]")
        #expect(url.host == "::1" || url.host == "[::1]", "\(url)")
        let answer = try await ProcessRunner.run(
            "/usr/bin/curl", ["-s", "-g", "--max-time", "10", url.absoluteString + "api/pipelines"])
        #expect(answer.standardOutput.contains(#""name":"p""#), "\(answer.standardOutput)\(answer.standardError)")
        process.signal(SIGTERM)
        #expect(await process.exited().status == 0)

        // Every other IPv6 address is off loopback and needs the token, as 0.0.0.0 does.
        let open = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), ["serve", served.file, "--listen", "[::]:0"])
        #expect(open.status == 64)
        #expect(open.standardError.contains("reachable from other machines"))
    }
}
