import CloudSync
import CloudSyncAuth
import CloudSyncHTTP
import CloudSyncTesting
import Foundation
import Testing

/// Fault-plan files, the data directory, and `cloudsync-emulator` as a user runs it.
@Suite(.timeLimit(.minutes(10))) struct EmulatorCommandTests {
    @Test func aYAMLFaultPlanReadsAsItsJSONTwin() throws {
        let yaml = """
            rules:
              - route: GET /drive/v3/files/{id}
                calls: [3, 4]
                status: 503
              - rate: 0.25
                seed: 7
                status: 500
              - status: 429
                retryAfterSeconds: 2
              - latencyMs: 150
              - calls: [1]
                hang: true

            """
        let json = """
            {"rules": [{"route": "GET /drive/v3/files/{id}", "calls": [3, 4], "status": 503},
              {"rate": 0.25, "seed": 7, "status": 500}, {"status": 429, "retryAfterSeconds": 2}, {"latencyMs": 150},
              {"calls": [1], "hang": true}]}
            """
        let plan = try FaultPlanFile.parse(yaml, file: "faults.yaml")
        #expect(plan == (try FaultPlanFile.parse(json, file: "faults.json")))
        #expect(
            plan.rules == [
                .errors(503, onCalls: [3, 4], route: "GET /drive/v3/files/{id}"),
                .errorRate(0.25, seed: 7, status: 500),
                .tooManyRequests(retryAfterSeconds: 2), .latency(milliseconds: 150), .hang(on: .calls([1])),
            ])
    }

    @Test(arguments: [
        ("rules:\n  - status: 503\n    calls: [1]\n  - stauts: 500\n", 4, "unknown field 'stauts'"),
        ("rules:\n  - status: five hundred\n", 2, "expected a whole number"),
        ("rules:\n  - calls: [1]\n    latencyMs: 5\n    hang: true\n", 2, "exactly one of status"),
        ("rules:\n  - route: FETCH files\n    status: 500\n", 2, "route pattern"),
        ("rules:\n  - status: 500\n  - [\n", 4, "did not find expected"),
        ("{}\n", 1, "missing field 'rules'"),
    ])
    func aBadFaultPlanIsRefusedWithFileAndLine(_ text: String, _ line: Int, _ message: String) {
        #expect {
            _ = try FaultPlanFile.parse(text, file: "faults.yaml")
        } throws: { error in
            let rendered = (error as? EmulatorError)?.message ?? ""
            return rendered.hasPrefix("faults.yaml:\(line):") && rendered.contains(": error: ")
                && rendered.contains(message)
        }
    }

    @Test func stateSavedInTheDataDirectoryComesBackInTheNextServer() async throws {
        let directory = try TemporaryDirectory()
        let data = directory.path + "/emulator"
        let first = try EmulatorServer(services: [DriveEmulator(), CloudKitEmulator()], dataDirectory: data)
        let drive = first.services[0] as! DriveEmulator
        let client = try #require(drive.oauth.defaultClient)
        let google = OAuthClientConfiguration(
            clientID: client.id, clientSecret: client.secret,
            authorizationEndpoint: first.server.url(GoogleOAuthEmulator.authorizationPath),
            tokenEndpoint: first.server.url(GoogleOAuthEmulator.tokenPath), scopes: ["s"])
        let redirect = try await TestBrowser.fetchWithoutRedirect(
            InstalledAppSignIn(client: google).authorizationURL(
                redirectURI: "http://127.0.0.1:9/", pkce: PKCE(verifier: String(repeating: "v", count: 43)), state: "s")
        )
        let code = try #require(URLComponents(string: redirect.headers["Location"] ?? "")?.queryItems?.first?.value)
        let granted = try await OAuthTokenClient(configuration: google).exchange(
            code: code, verifier: String(repeating: "v", count: 43), redirectURI: "http://127.0.0.1:9/")
        let refreshToken = try #require(granted.refreshToken)
        try first.stop()

        for name in ["drive", "cloudkit"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(data)/\(name).json")
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        }
        #expect(
            (try FileManager.default.contentsOfDirectory(atPath: data)).sorted() == ["cloudkit.json", "drive.json"])
        let second = try EmulatorServer(services: [DriveEmulator(), CloudKitEmulator()], dataDirectory: data)
        defer { second.server.stop() }
        #expect((second.services[0] as! DriveEmulator).oauth.isActive(refreshToken: refreshToken))
    }

    @Test func anUnreadableDataFileIsNamed() throws {
        let directory = try TemporaryDirectory()
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: directory.path + "/drive.json"))
        #expect {
            _ = try EmulatorServer(services: [DriveEmulator()], dataDirectory: directory.path)
        } throws: { error in
            (error as? EmulatorError)?.message.hasPrefix("cannot read \(directory.path)/drive.json: ") == true
        }
    }

    @Test(arguments: [
        (["--port", "http"], "--port needs a port number from 0 to 65535; found 'http'"),
        (["--drive", "--verbose"], "unknown option '--verbose'"),
        (["--data"], "--data needs a value"),
        (["serve"], "unexpected argument 'serve'"),
        (["--tls=yes"], "--tls takes no value"),
    ])
    func aWrongCommandLineIsAUsageError(_ arguments: [String], _ message: String) async throws {
        let result = try await ProcessRunner.run(try ProcessRunner.builtProduct("cloudsync-emulator"), arguments)
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("Error: \(message)\nUsage: \(EmulatorCommand.usage)\n"))
    }

    @Test func aBadFaultsFileStopsTheEmulatorWithFileAndLine() async throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/faults.yaml"
        try "rules:\n  - status: 503\n    calls: [2]\n  - latency: 20\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync-emulator"), ["--faults", file])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("Error: \(file):4:"))
        #expect(result.standardError.contains("unknown field 'latency'"))
        #expect(result.standardError.contains("  - latency: 20\n"))
    }

    @Test func theEmulatorPrintsItsURLsServesAndKeepsASignInAcrossARestart() async throws {
        let directory = try TemporaryDirectory()
        let data = directory.path + "/state"
        let executable = try ProcessRunner.builtProduct("cloudsync-emulator")
        let faults = directory.path + "/faults.json"
        try #"{"rules": [{"route": "POST /token", "calls": [1], "status": 503}]}"#.write(
            toFile: faults, atomically: true, encoding: .utf8)

        let first = try RunningProcess(executable, ["--drive", "--data", data, "--faults", faults])
        let line = try #require(await first.line())
        let urls = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])
        #expect(Array(urls.keys) == ["drive"])
        let drive = try #require(urls["drive"])
        let base = try #require(drive["endpoint"])
        #expect(base.hasPrefix("http://127.0.0.1:"))
        #expect(drive["tokenEndpoint"] == base + "/token")
        #expect(drive["authEndpoint"] == base + "/o/oauth2/v2/auth")
        let client = OAuthClientConfiguration(
            clientID: try #require(drive["clientId"]), clientSecret: drive["clientSecret"],
            authorizationEndpoint: URL(string: drive["authEndpoint"]!)!,
            tokenEndpoint: URL(string: drive["tokenEndpoint"]!)!,
            scopes: ["https://www.googleapis.com/auth/drive.appdata"])

        // The fault plan answers the first token request 503; the token client's retry takes the second.
        let person = PersonWithBrowser()
        let credentials = try await InstalledAppSignIn(client: client).signIn(person.interaction)
        let refreshToken = try #require(credentials[.oauthRefreshToken])
        first.signal(SIGTERM)
        let ended = await first.exited()
        #expect(ended.status == 0)
        #expect(ended.standardError.contains("stopped; state saved in \(data)"))

        let second = try RunningProcess(executable, ["--drive", "--data", data])
        let restarted = try #require(await second.line())
        let port = try #require(
            (try JSONSerialization.jsonObject(with: Data(restarted.utf8)) as? [String: [String: String]])?["drive"]?[
                "tokenEndpoint"])
        var moved = client
        moved.tokenEndpoint = URL(string: port)!
        let renewed = try await OAuthTokenClient(configuration: moved).refresh(refreshToken)
        #expect(renewed.accessToken.hasPrefix("ya29."))
        second.signal(SIGINT)
        #expect(await second.exited().status == 0)
    }
}

/// `cloudsync-emulator --tls` against Python's `ssl` module as the independent client.
@Suite(.timeLimit(.minutes(10))) struct EmulatorTLSCommandTests {
    static let python = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/pyenv/bin/python3").path

    /// Asks Drive and CloudKit (argv: the two endpoints and the CA file) over TLS trusting the CA file, then with only
    /// the system's authorities, then trusting it again.
    static let client = """
        import http.client, json, ssl, sys, urllib.parse
        drive, cloudkit, cafile = sys.argv[1:4]
        trusted = ssl.create_default_context(cafile=cafile)
        def get(url, context):
            parts = urllib.parse.urlsplit(url)
            connection = http.client.HTTPSConnection(parts.hostname, parts.port, context=context, timeout=30)
            connection.request("GET", parts.path + "?" + parts.query)
            response = connection.getresponse()
            return response.status, response.read()
        seen = {}
        seen["drive"] = get(drive + "/drive/v3/about?fields=user", trusted)[0]
        status, body = get(cloudkit + "/database/1/iCloud.example/development/public/users/caller"
                           + "?ckAPIToken=cloudsync-emulator-api-token", trusted)
        seen["cloudkit"] = status
        seen["cloudkitRedirect"] = json.loads(body)["redirectURL"]
        try:
            get(drive + "/drive/v3/about", ssl.create_default_context())
            seen["untrusted"] = "answered"
        except ssl.SSLCertVerificationError as error:
            seen["untrusted"] = error.verify_message
        seen["afterRefusal"] = get(drive + "/drive/v3/about?fields=user", trusted)[0]
        print(json.dumps(seen))
        """

    @Test func theStartLineNamesACAFileThatVerifiesTheServedCertificate() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let directory = try TemporaryDirectory()
        let data = directory.path + "/state"
        let emulator = try RunningProcess(
            try ProcessRunner.builtProduct("cloudsync-emulator"), ["--tls", "--data", data])
        let line = try #require(await emulator.line())
        let urls = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])
        #expect(urls.keys.sorted() == ["cloudkit", "drive"])
        let drive = try #require(urls["drive"])
        let cloudkit = try #require(urls["cloudkit"])
        let base = try #require(drive["endpoint"])
        #expect(base.hasPrefix("https://127.0.0.1:"))
        #expect(cloudkit["endpoint"] == base)
        for key in ["authEndpoint", "tokenEndpoint", "revokeEndpoint"] { #expect(drive[key]?.hasPrefix(base) == true) }
        let caFile = data + "/" + EmulatorServer.caFileName
        #expect(drive["caFile"] == caFile)
        #expect(cloudkit["caFile"] == caFile)
        let pem = try String(contentsOfFile: caFile, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN CERTIFICATE-----\n") && pem.hasSuffix("-----END CERTIFICATE-----\n"))
        #expect(!pem.contains("PRIVATE"))
        // The CA file alone beside the state: no key written anywhere.
        #expect(try FileManager.default.contentsOfDirectory(atPath: data) == [EmulatorServer.caFileName])

        // CloudKit asked by name rather than address: its redirect must come back on the name.
        let byName = base.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let result = try await ProcessRunner.run(Self.python, ["-c", Self.client, base, byName, caFile])
        #expect(result.status == 0, "\(result.standardError)")
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(seen["drive"] as? Int == 401)
        #expect(seen["cloudkit"] as? Int == 421)
        // The sign-in page on the scheme and host the call came in on.
        #expect((seen["cloudkitRedirect"] as? String)?.hasPrefix(byName + CloudKitWebAuthEmulator.signInPath) == true)
        #expect(seen["untrusted"] as? String == "unable to get local issuer certificate")
        #expect(seen["afterRefusal"] as? Int == 401)

        emulator.signal(SIGTERM)
        #expect(await emulator.exited().status == 0)
    }

    /// The CloudKit database's asset URLs on an emulator over TLS: https, uploaded to and downloaded from as such.
    @Test func cloudKitAssetURLsAreHTTPSOnAServerWithTLS() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the Python test environment is missing: run scripts/python-env.sh")
            return
        }
        let cloudKit = CloudKitEmulator()
        let host = try EmulatorServer(services: [cloudKit], tls: true)
        defer { try? host.stop() }
        let container = "iCloud.com.example.cloudsync"
        let token = cloudKit.webAuth.issueToken(container: container, environment: "development")
        let caFile = try #require(host.caFile)
        let result = try await ProcessRunner.run(
            Self.python,
            [
                "-c",
                """
                import json, ssl, sys, urllib.parse, urllib.request
                base, cafile, token = sys.argv[1:4]
                context = ssl.create_default_context(cafile=cafile)
                def call(url, body):
                    request = urllib.request.Request(url, data=body, method="POST")
                    return json.load(urllib.request.urlopen(request, context=context))
                def database(operation, body):
                    query = urllib.parse.urlencode(
                        {"ckAPIToken": "cloudsync-emulator-api-token", "ckWebAuthToken": token})
                    url = base + "/database/1/iCloud.com.example.cloudsync/development/private/" + operation
                    return call(url + "?" + query, json.dumps(body).encode())
                database("zones/modify", {"operations": [{"operationType": "create", "zone": {"zoneID": {"zoneName": "Z"}}}]})
                upload = database("assets/upload", {"zoneID": {"zoneName": "Z"},
                    "tokens": [{"recordName": "doc", "recordType": "Doc", "fieldName": "file"}]})["tokens"][0]["url"]
                asset = call(upload, b"over tls")["singleFile"]
                database("records/modify", {"zoneID": {"zoneName": "Z"}, "operations": [{"operationType": "forceReplace",
                    "record": {"recordName": "doc", "recordType": "Doc", "fields": {"file": {"type": "ASSET", "value": asset}}}}]})
                record = database("records/lookup", {"zoneID": {"zoneName": "Z"}, "records": [{"recordName": "doc"}]})
                download = record["records"][0]["fields"]["file"]["value"]["downloadURL"]
                print(json.dumps({"upload": upload, "download": download,
                                  "bytes": urllib.request.urlopen(download, context=context).read().decode()}))
                """,
                host.baseURL.absoluteString, caFile, token,
            ])
        #expect(result.status == 0, "\(result.standardError)")
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: String])
        let base = host.baseURL.absoluteString
        #expect(base.hasPrefix("https://"))
        #expect(seen["upload"]?.hasPrefix(base + "/") == true, "\(seen)")
        #expect(seen["download"]?.hasPrefix(base + "/") == true, "\(seen)")
        #expect(seen["bytes"] == "over tls")
    }

    @Test func withoutADataDirectoryTheCAFileLivesInATemporaryDirectoryRemovedOnExit() async throws {
        let emulator = try RunningProcess(try ProcessRunner.builtProduct("cloudsync-emulator"), ["--drive", "--tls"])
        let line = try #require(await emulator.line())
        let urls = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])
        let caFile = try #require(urls["drive"]?["caFile"])
        #expect(caFile.hasSuffix("/" + EmulatorServer.caFileName))
        #expect(FileManager.default.fileExists(atPath: caFile))
        let served = try #require(await emulator.errorLine())
        #expect(
            served.contains(" on https://127.0.0.1:")
                && served.hasSuffix(", CA certificate in \(caFile); stop with Ctrl-C"))

        emulator.signal(SIGINT)
        #expect(await emulator.exited().status == 0)
        let made = URL(fileURLWithPath: caFile).deletingLastPathComponent().path
        #expect(!FileManager.default.fileExists(atPath: made))
    }
}

/// A person whose browser follows the sign-in's redirect.
final class PersonWithBrowser: Sendable {
    var interaction: SignInInteraction {
        SignInInteraction(show: { message in
            guard
                let url = message.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }).first(where: {
                    $0.hasPrefix("http://") && $0.contains("?")
                }).flatMap(URL.init(string:))
            else { return }
            Task { _ = try? await TestBrowser.open(url) }
        })
    }
}
