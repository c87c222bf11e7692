import CloudSyncTesting
import Foundation
import Testing

/// `cloudsync-emulator` (the loopback server's own parser) as an attacker meets it: the hostile requests of
/// `scripts/http_abuse.py`, each on its own connection, and after each the emulator still answers.
@Suite(.timeLimit(.minutes(5))) struct EmulatorHostileClientTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The loopback server's answers, by case: 0 where the request never ends and the client gives up first.
    static let expected: [String: Int] = [
        "issue-chunk-7fffffffffffffff": 413, "chunk-7ffffffffffffffe": 413, "chunk-ffffffffffffffffff": 413,
        "chunk-negative": 400, "chunk-plus": 400, "chunk-size-line-10k": 400, "chunk-no-crlf": 400,
        "content-length-1.5g": 413, "content-length-overflow": 413, "content-length-negative": 400,
        "content-length-plus": 400, "content-length-twice-differing": 400, "content-length-and-chunked": 400,
        "transfer-encoding-gzip": 501, "head-17k": 431, "head-70k": 431, "head-1m-no-end": 431, "many-headers": 431,
        "target-20k": 431, "bad-request-line": 400, "http-9": 400, "header-without-colon": 400,
        "expect-continue-huge": 413, "http-2-preface": 400,
    ]

    @Test func everyHostileRequestLeavesTheEmulatorAnswering() async throws {
        let emulator = try RunningProcess(try ProcessRunner.builtProduct("cloudsync-emulator"), ["--drive"])
        let line = try #require(await emulator.line())
        let urls = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])
        let base = try #require(urls["drive"]?["endpoint"])
        let result = try await ProcessRunner.run(
            Self.root + "/.build/pyenv/bin/python3",
            [Self.root + "/scripts/http_abuse.py", "cases", base + "/", "--health", "/drive/v3/about"])
        let figures = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
            "\(result.standardOutput)\(result.standardError)")
        let cases = try #require(figures["cases"] as? [[String: Any]])
        #expect(cases.count >= 30)
        for entry in cases {
            let name = entry["name"] as? String ?? "?"
            // Any status will do for the health check (the route wants a token): only that it is answered.
            #expect((entry["health"] as? Int ?? 0) > 0, "the emulator stopped answering after \(name): \(entry)")
            if let status = Self.expected[name] {
                #expect(entry["answer"] as? Int == status, "\(name): \(entry)")
                #expect(entry["closed"] as? Bool == true, "\(name) left its connection open")
            }
        }
        emulator.signal(SIGTERM)
        #expect(await emulator.exited().status == 0)
    }
}
