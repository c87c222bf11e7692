import CloudSync
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// What `URLSessionTransport` takes from the environment, checked in a separate process.
///
/// `cloudsync-test-fixture http-get URL` runs with the variables set for it alone and sends through the real client
/// to loopback servers. A `LoopbackHTTPServer` plays the proxy: it answers an absolute-form request itself
/// and logs the target, so the log says whether a request went through it and for which origin.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ProxyAndCertificateTests {
    static let proxyVariables = [
        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    /// The test's environment without any proxy or CA variable, plus `extra`: only the child sees these.
    static func environment(_ extra: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in proxyVariables + ["SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE"] {
            environment[name] = nil
        }
        return environment.merging(extra) { $1 }
    }

    static func fetch(_ url: URL, environment extra: [String: String]) async throws -> ProcessResult {
        try await ProcessRunner.run(
            ProcessRunner.builtProduct("cloudsync-test-fixture"), ["http-get", url.absoluteString],
            environment: environment(extra))
    }

    /// Where a request should end up.
    enum Route: Sendable { case proxy, direct }

    struct Case: Sendable, CustomTestStringConvertible {
        let variables: [String: String]
        let route: Route
        var testDescription: String { variables.keys.sorted().joined(separator: "+") + " -> \(route)" }
    }

    static let proxyPort = "PROXY"
    static let cases: [Case] = [
        Case(variables: ["http_proxy": proxyPort], route: .proxy),
        // libcurl ignores HTTP_PROXY in upper case (a CGI program would otherwise take it from a request header).
        Case(variables: ["HTTP_PROXY": proxyPort], route: .direct),
        Case(variables: ["ALL_PROXY": proxyPort], route: .proxy),
        Case(variables: ["all_proxy": proxyPort], route: .proxy),
        // https_proxy is for https:// URLs only.
        Case(variables: ["https_proxy": proxyPort], route: .direct),
        Case(variables: ["http_proxy": proxyPort, "NO_PROXY": "127.0.0.1"], route: .direct),
        Case(variables: ["http_proxy": proxyPort, "no_proxy": "example.org,127.0.0.1"], route: .direct),
        Case(variables: ["ALL_PROXY": proxyPort, "NO_PROXY": "*"], route: .direct),
        Case(variables: ["http_proxy": proxyPort, "NO_PROXY": "example.org"], route: .proxy),
    ]

    @Test(arguments: cases)
    func plainHTTPGoesThroughTheProxyTheVariablesName(_ test: Case) async throws {
        let origin = try LoopbackHTTPServer()
        let proxy = try LoopbackHTTPServer()
        defer {
            origin.stop()
            proxy.stop()
        }
        origin.route("GET /hello") { _ in .text(200, "from the origin") }
        proxy.route("GET /hello") { _ in .text(200, "from the proxy") }
        let variables = test.variables.mapValues { $0 == Self.proxyPort ? "http://127.0.0.1:\(proxy.port)" : $0 }

        let result = try await Self.fetch(origin.url("/hello"), environment: variables)
        #expect(result.status == 0, "\(result.standardError)")
        switch test.route {
        case .proxy:
            #expect(result.standardOutput == "200\nfrom the proxy")
            #expect(proxy.requestLog.map(\.target) == ["http://127.0.0.1:\(origin.port)/hello"])
            #expect(origin.requestLog.isEmpty)
        case .direct:
            #expect(result.standardOutput == "200\nfrom the origin")
            #expect(origin.requestLog.map(\.target) == ["/hello"])
            #expect(proxy.requestLog.isEmpty)
        }
        #expect(ProcessInfo.processInfo.environment["http_proxy"] == nil, "the variables were the child's alone")
    }

    /// For an `https://` URL libcurl asks the proxy for a tunnel with `CONNECT host:port`; this proxy refuses it,
    /// so the request fails, but the proxy's log shows it was asked.
    @Test(arguments: ["https_proxy", "HTTPS_PROXY", "ALL_PROXY"])
    func httpsAsksTheProxyNamedForATunnel(_ variable: String) async throws {
        let proxy = try LoopbackHTTPServer()
        defer { proxy.stop() }
        let result = try await Self.fetch(
            URL(string: "https://127.0.0.1:9/secret?access_token=t0ps3cret")!,
            environment: [variable: "http://127.0.0.1:\(proxy.port)"])
        #expect(result.status == 1)
        #expect(proxy.requestLog.map(\.method) == ["CONNECT"])
        #expect(proxy.requestLog.map(\.target) == ["127.0.0.1:9"])
        #expect(!result.standardError.contains("t0ps3cret"))

        let direct = try await Self.fetch(
            URL(string: "https://127.0.0.1:9/")!,
            environment: [variable: "http://127.0.0.1:\(proxy.port)", "NO_PROXY": "127.0.0.1"])
        #expect(direct.status == 1)
        #expect(direct.standardError.hasPrefix("ERR_OFFLINE"), "\(direct.standardError)")
        #expect(proxy.requestLog.count == 1, "NO_PROXY sent the second request past the proxy")
    }

    /// Pointing `SSL_CERT_FILE` or `CURL_CA_BUNDLE` at a server's self-signed certificate does not make URLSession
    /// trust it.
    ///
    /// The server is Python's (an independent peer); FoundationNetworking hands libcurl its CA bundle itself. Python's client, given the same file, trusts it, so the certificate is fine.
    @Test func sslCertFileAndCurlCABundleDoNotChangeWhatURLSessionTrusts() async throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/tls")
        let certificate = fixtures.appendingPathComponent("loopback-cert.pem").path
        let server = try await PythonTLSServer.start(
            certificate: certificate, key: fixtures.appendingPathComponent("loopback-key.pem").path)
        defer { server.stop() }
        let url = URL(string: "https://127.0.0.1:\(server.port)/hello")!

        let python = try await ProcessRunner.run(
            PythonTLSServer.python,
            [
                "-c",
                "import ssl, sys, urllib.request; context = ssl.create_default_context(cafile=sys.argv[2]); "
                    + "print(urllib.request.urlopen(sys.argv[1], context=context).read().decode(), end='')",
                url.absoluteString, certificate,
            ])
        #expect(python.standardOutput == "over tls", "\(python.standardError)")

        for variable in ["SSL_CERT_FILE", "CURL_CA_BUNDLE"] {
            let result = try await Self.fetch(url, environment: [variable: certificate])
            #expect(result.status == 1, "\(variable): \(result.standardOutput)")
            #expect(result.standardError.hasPrefix("ERR_PROVIDER: GET /hello failed"), "\(result.standardError)")
            #expect(result.standardError.contains("SSL certificate problem"), "\(variable): \(result.standardError)")
            #expect(result.standardError.contains("update-ca-certificates"), "\(result.standardError)")
        }
    }
}

/// `python3 -m http.server`'s handler behind TLS with a given certificate, on 127.0.0.1 and a port it picks.
final class PythonTLSServer: Sendable {
    static var python: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/pyenv/bin/python3").path
    }

    static let script = """
        import http.server, ssl, sys
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"over tls"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def log_message(self, *arguments):
                pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        server.socket = context.wrap_socket(server.socket, server_side=True)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """

    let port: Int
    private let process: RunningProcess

    private init(port: Int, process: RunningProcess) {
        self.port = port
        self.process = process
    }

    /// Starts the server and awaits the port it prints.
    static func start(certificate: String, key: String) async throws -> PythonTLSServer {
        let process = try RunningProcess(python, ["-c", script, certificate, key])
        guard let line = await process.line(), let port = Int(line.trimmingCharacters(in: .whitespaces)) else {
            process.signal(SIGKILL)
            throw CocoaError(
                .fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "the TLS server did not start"])
        }
        return PythonTLSServer(port: port, process: process)
    }

    /// Kills the server; SIGKILL, because a child of the test runner may inherit SIGTERM ignored (it did here).
    func stop() { process.signal(SIGKILL) }
}
