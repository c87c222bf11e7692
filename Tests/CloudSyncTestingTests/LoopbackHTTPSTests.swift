import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Glibc
import Testing

/// The loopback server over TLS with a throwaway identity, against Python's `ssl` module as the independent client:
/// a client that trusts the authority's certificate gets its answers, one that does not is refused, and neither a
/// refused nor a silent client harms the server.
@Suite(.serialized, .timeLimit(.minutes(10))) struct LoopbackHTTPSTests {
    static let python = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/pyenv/bin/python3").path

    /// Runs `script` with the server's port and the authority's PEM file; its standard output as JSON.
    private func client(_ script: String, port: UInt16, caFile: String) async throws -> [String: Any] {
        let result = try await ProcessRunner.run(Self.python, ["-c", script, String(port), caFile])
        #expect(result.status == 0, "\(result.standardError)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
    }

    private func makeServer() throws -> (LoopbackHTTPServer, TemporaryDirectory, String) {
        let identity = try TLSIdentity.throwaway()
        var options = LoopbackHTTPServer.Options()
        options.tls = identity
        let server = try LoopbackHTTPServer(options: options)
        server.route("GET /ping") { request in .text(200, "pong from " + request.origin) }
        server.route("POST /echo") { request in HTTPResponse(status: 200, body: request.body) }
        let directory = try TemporaryDirectory()
        let caFile = directory.path + "/ca.pem"
        try identity.authorityCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        return (server, directory, caFile)
    }

    @Test func aClientTrustingTheAuthorityGetsAnswersOverTLS() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let (server, directory, caFile) = try makeServer()
        defer { server.stop() }
        _ = directory
        #expect(server.baseURL.absoluteString == "https://127.0.0.1:\(server.port)")
        let pem = try String(contentsOfFile: caFile, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----\n") && pem.hasSuffix("-----END CERTIFICATE-----\n"))
        #expect(!pem.contains("PRIVATE"))

        let seen = try await client(
            """
            import http.client, json, ssl, sys
            port, cafile = int(sys.argv[1]), sys.argv[2]
            context = ssl.create_default_context(cafile=cafile)
            seen = {}
            for host in ["127.0.0.1", "localhost"]:
                connection = http.client.HTTPSConnection(host, port, context=context, timeout=30)
                connection.request("GET", "/ping")
                seen[host] = connection.getresponse().read().decode()
                body = bytes(range(256)) * 4096
                connection.request("POST", "/echo", body=body)
                seen[host + " echo"] = connection.getresponse().read() == body
                certificate = connection.sock.getpeercert()
                seen["names"] = [value for _, value in certificate["subjectAltName"]]
                seen["hours"] = (ssl.cert_time_to_seconds(certificate["notAfter"])
                                 - ssl.cert_time_to_seconds(certificate["notBefore"])) / 3600
                seen["version"] = connection.sock.version()
                connection.close()
            print(json.dumps(seen))
            """, port: server.port, caFile: caFile)
        #expect(seen["127.0.0.1"] as? String == "pong from https://127.0.0.1:\(server.port)")
        #expect(seen["localhost"] as? String == "pong from https://localhost:\(server.port)")
        #expect(seen["127.0.0.1 echo"] as? Bool == true)
        #expect(seen["localhost echo"] as? Bool == true)
        #expect(seen["names"] as? [String] == ["localhost", "127.0.0.1"])
        // From an hour ago to a day from now.
        #expect((seen["hours"] as? Double).map { abs($0 - 25) < 0.01 } == true)
        #expect(seen["version"] as? String == "TLSv1.3")
        // Both requests of each client on its one connection: keep-alive works over TLS as without.
        let connections = server.requestLog.map(\.connectionID)
        #expect(connections.count == 4 && connections[0] == connections[1] && connections[2] == connections[3])
    }

    @Test func aClientThatDoesNotTrustTheCertificateIsRefusedAndTheServerKeepsServing() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let (server, directory, caFile) = try makeServer()
        defer { server.stop() }
        _ = directory

        let seen = try await client(
            """
            import http.client, json, socket, ssl, sys
            port, cafile = int(sys.argv[1]), sys.argv[2]
            seen = {}
            for attempt in range(3):
                try:
                    connection = http.client.HTTPSConnection(
                        "127.0.0.1", port, context=ssl.create_default_context(), timeout=30)
                    connection.request("GET", "/ping")
                    seen["untrusted"] = connection.getresponse().read().decode()
                except ssl.SSLCertVerificationError as error:
                    seen["untrusted"] = error.verify_message
            plain = socket.create_connection(("127.0.0.1", port), timeout=30)
            plain.sendall(b"GET /ping HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
            answer = b""
            while chunk := plain.recv(4096):
                answer += chunk
            seen["plainAnswered"] = b"HTTP/" in answer
            connection = http.client.HTTPSConnection(
                "127.0.0.1", port, context=ssl.create_default_context(cafile=cafile), timeout=30)
            connection.request("GET", "/ping")
            seen["trusted"] = connection.getresponse().read().decode()
            print(json.dumps(seen))
            """, port: server.port, caFile: caFile)
        #expect(seen["untrusted"] as? String == "unable to get local issuer certificate")
        #expect(seen["plainAnswered"] as? Bool == false)
        #expect(seen["trusted"] as? String == "pong from https://127.0.0.1:\(server.port)")
        // The refused handshakes read no request: only the trusting client's is logged.
        #expect(server.requestLog.map(\.path) == ["/ping"])
        try await waitUntil { server.openConnectionCount == 0 }
    }

    @Test func stopReturnsWhileAClientIsSilentInTheHandshake() async throws {
        let (server, directory, _) = try makeServer()
        _ = directory
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = server.port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        try await waitUntil { server.openConnectionCount == 1 }

        server.stop()
        #expect(server.openConnectionCount == 0)
    }
}
