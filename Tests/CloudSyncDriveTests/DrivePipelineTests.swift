import CloudSync
import CloudSyncAuth
import CloudSyncCLI
import CloudSyncDrive
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@Suite struct DriveFactoryTests {
    let factory = DriveProviderFactory()

    func configure(_ fields: [String: String]) -> Result<DriveProviderFactory.Configuration, ProviderConfigurationError>
    {
        Result { () throws(ProviderConfigurationError) in
            try factory.configuration(from: ProviderFieldValues(fields.mapValues { .text($0) }))
        }
    }

    @Test func aMissingCredentialNamesTheThreeWays() throws {
        guard case .failure(let error) = configure([:]) else {
            Issue.record("a provider with no credential was accepted")
            return
        }
        #expect(error.field == nil)
        #expect(error.message.contains("`accessToken`"))
        #expect(error.message.contains("`refreshToken` with `clientId` and `clientSecret`"))
        #expect(error.message.contains("cloudsync login"))
    }

    @Test func aRefreshTokenNeedsItsClient() {
        guard case .failure(let error) = configure(["refreshToken": "1//x"]) else {
            Issue.record("a refresh token without a client was accepted")
            return
        }
        #expect(error.field == "clientId")
    }

    @Test func endpointsMustBeHTTPURLs() {
        guard case .failure(let error) = configure(["accessToken": "t", "endpoint": "ftp://example.com"]) else {
            Issue.record("an ftp endpoint was accepted")
            return
        }
        #expect(error.field == "endpoint")
    }

    @Test func theCredentialSourceIsPlannedWithoutTheSecret() throws {
        let configuration = try configure(["clientId": "id", "clientSecret": "s3cr3t", "refreshToken": "1//tok"]).get()
        let details = factory.planDetails(of: configuration)
        #expect(details["credentials"]?.contains("the pipeline's `refreshToken` for client id") == true)
        #expect(!details.values.joined().contains("1//tok") && !details.values.joined().contains("s3cr3t"))
        let stored = try configure(["clientId": "id"]).get()
        #expect(factory.planDetails(of: stored)["credentials"]?.contains("`cloudsync login` stores") == true)
        #expect(factory.signIn(for: stored) is InstalledAppSignIn)
        #expect(factory.signIn(for: try configure(["accessToken": "t"]).get()) == nil)
    }

    @Test func withNothingStoredMakingTheProviderIsNotSignedInNamingTheLoginCommand() throws {
        let configuration = try configure(["clientId": "id"]).get()
        #expect {
            try factory.make(
                configuration,
                context: ProviderContext(providerID: "drive", pipelineFile: "pipelines/drive backup.yaml"))
        } throws: { error in
            // The command to run, with this pipeline's file and this provider's id: copied, it works.
            let error = error as? CloudSyncError
            return error?.code == .notSignedIn
                && error?.message.contains("run `cloudsync login 'pipelines/drive backup.yaml' --provider drive`")
                    == true
        }
    }
}

/// `cloudsync login` and `run` with the built-in googleDrive type, in-process, against an in-process emulator.
@Suite struct DriveLoginTests {
    /// `cloudsync` in-process, its messages handed to `collect`, a browser opening every sign-in address it prints.
    static func signingInTool(
        environment: [String: String], collect: @escaping @Sendable (String) -> Void
    ) -> CommandLineTool {
        CommandLineTool(
            standardOutput: { _ in },
            standardError: { text in
                collect(text)
                let address = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                    $0.hasPrefix("http://") && $0.contains("?")
                }
                if let url = address.flatMap(URL.init(string:)) { Task { _ = try? await TestBrowser.open(url) } }
            }, standardInput: { nil }, environment: environment)
    }

    @Test func loginStoresTheRefreshTokenAndARunWritesWithIt() async throws {
        let host = try DriveHost()
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/source", withIntermediateDirectories: true)
        for (name, value) in [("alpha", "one"), ("beta", "two")] {
            try value.write(toFile: directory.path + "/source/" + name, atomically: true, encoding: .utf8)
        }
        let urls = host.server.urls["drive"]!
        let file = directory.path + "/drive.yaml"
        try """
        version: 1
        name: drive
        providers:
          source: { type: directory, path: source }
          drive:
            type: googleDrive
            clientId: ${env:CLIENT_ID}
            clientSecret: ${env:CLIENT_SECRET}
            endpoint: ${env:ENDPOINT}
            tokenEndpoint: ${env:TOKEN}
            authEndpoint: ${env:AUTH}
        store:
          providers: [source, drive]
        jobs:
          - { type: migrate, from: source, to: drive }

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let environment = [
            "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!, "ENDPOINT": urls["endpoint"]!,
            "TOKEN": urls["tokenEndpoint"]!, "AUTH": urls["authEndpoint"]!,
        ]
        let errors = Mutex("")
        func tool() -> CommandLineTool {
            Self.signingInTool(environment: environment) { text in errors.withLock { $0 += text } }
        }
        // Without a sign-in the run says how to give one.
        #expect(await tool().run(["run", file, "--quiet"]) != .success)
        #expect(errors.withLock { $0 }.contains("cloudsync login"))

        #expect(await tool().run(["login", file, "--provider", "drive"]) == .success, "\(errors.withLock { $0 })")
        #expect(await tool().run(["run", file, "--quiet"]) == .success, "\(errors.withLock { $0 })")
        let user = GoogleOAuthEmulator.Configuration().defaultUser
        let stored = host.files.files(of: user).map { ($0.name, String(decoding: $0.content, as: UTF8.self)) }
        #expect(Dictionary(uniqueKeysWithValues: stored) == ["alpha": "one", "beta": "two"])
        #expect(host.files.files(of: user).allSatisfy { $0.parents == ["appDataFolder"] })

        // Another device made a second "alpha": the next run's report counts it on the provider's line.
        host.clock.advance(by: .seconds(1))
        host.files.addFile(user: user, name: "alpha", content: Data("from elsewhere".utf8))
        let report = directory.path + "/report.json"
        #expect(await tool().run(["run", file, "--quiet", "--report", report]) == .success)
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report)))
        let providers = (object as? [String: Any])?["providers"] as? [[String: Any]] ?? []
        #expect(providers.first { $0["id"] as? String == "drive" }?["duplicates"] as? Int == 1)
        #expect(providers.first { $0["id"] as? String == "source" }?["duplicates"] == nil)
        // The migrate wrote the newest and deleted the other.
        #expect(host.files.files(of: user).filter { $0.name == "alpha" }.count == 1)
    }

    /// With the built-in googleDrive type: one `login --account`, and two pipelines naming the account write with it,
    /// neither keeping the refresh token in its own state.
    @Test func oneAccountSignInServesTwoDrivePipelines() async throws {
        let host = try DriveHost()
        let directory = try TemporaryDirectory()
        let urls = host.server.urls["drive"]!
        func pipeline(_ name: String) throws -> String {
            let file = directory.path + "/\(name).yaml"
            try """
            version: 1
            name: \(name)
            providers:
              seed: { type: memory, items: { \(name).key: \(name) } }
              drive:
                type: googleDrive
                clientId: ${env:CLIENT_ID}
                clientSecret: ${env:CLIENT_SECRET}
                endpoint: ${env:ENDPOINT}
                tokenEndpoint: ${env:TOKEN}
                authEndpoint: ${env:AUTH}
                account: work
            store:
              providers: [drive]
            jobs:
              - { type: migrate, from: seed, to: drive }

            """.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
        let environment = [
            "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!, "ENDPOINT": urls["endpoint"]!,
            "TOKEN": urls["tokenEndpoint"]!, "AUTH": urls["authEndpoint"]!,
            "CLOUDSYNC_ACCOUNTS_DIR": directory.path + "/accounts",
        ]
        let errors = Mutex("")
        func tool() -> CommandLineTool {
            Self.signingInTool(environment: environment) { text in errors.withLock { $0 += text } }
        }
        let (first, second) = (try pipeline("first"), try pipeline("second"))
        #expect(await tool().run(["login", first, "--provider", "drive"]) == .success, "\(errors.withLock { $0 })")
        #expect(errors.withLock { $0 }.contains("is kept as account 'work'"))
        for file in [first, second] {
            #expect(await tool().run(["run", file, "--quiet"]) == .success, "\(errors.withLock { $0 })")
        }
        let user = GoogleOAuthEmulator.Configuration().defaultUser
        #expect(Set(host.files.files(of: user).map(\.name)) == ["first.key", "second.key"])
        for name in ["first", "second"] {
            let database = try StateDatabase(path: directory.path + "/.cloudsync/\(name)/state.db", readOnly: true)
            #expect(try ProviderState(provider: "drive", store: database).credential(.oauthRefreshToken) == nil)
            database.close()
        }
    }
}

/// An account switch between two runs of one pipeline, seen through the permission id in the state database.
@Suite struct DriveAccountSwitchTests {
    @Test func writesQueuedForOneAccountAreAbandonedWhenTheNextRunIsAnother() async throws {
        let host = try DriveHost()
        let directory = try TemporaryDirectory()
        try #"{"version": 1, "count": 2, "items": {"one": "1", "two": "2"}}"#.write(
            toFile: directory.path + "/items.export.json", atomically: true, encoding: .utf8)
        let file = directory.path + "/switch.yaml"
        try """
        version: 1
        name: switch
        providers:
          drive:
            type: googleDrive
            clientId: ${env:CLIENT_ID}
            clientSecret: ${env:CLIENT_SECRET}
            refreshToken: ${env:TOKEN}
            endpoint: ${env:ENDPOINT}
            tokenEndpoint: ${env:TOKEN_ENDPOINT}
            timeoutMs: 60000
        store:
          providers: [drive]
        jobs:
          - { type: import, path: items.export.json, to: store }

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let urls = host.server.urls["drive"]!
        func run(as user: String) async throws -> [String: Any] {
            let environment = [
                "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!, "ENDPOINT": urls["endpoint"]!,
                "TOKEN_ENDPOINT": urls["tokenEndpoint"]!, "TOKEN": host.signIn(user).refreshToken,
            ]
            let report = directory.path + "/report-\(user).json"
            _ = await CommandLineTool(standardOutput: { _ in }, standardError: { _ in }, environment: environment)
                .run(["run", file, "--quiet", "--report", report])
            let data = try Data(contentsOf: URL(fileURLWithPath: report))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        // Alice's run cannot upload (Drive answers 503): the two writes wait in the outbox.
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: Array(1...100), route: "POST /upload/drive/v3/files")]))
        let first = try await run(as: "alice@example.com")
        #expect((first["outbox"] as? [String: Any])?["pendingAfter"] as? Int == 2, "\(first)")
        host.server.server.clearFaultPlan()
        // Bob's run: the queued writes were for Alice's account, so they are abandoned, not written into Bob's.
        let second = try await run(as: "bob@example.com")
        let outbox = second["outbox"] as? [String: Any]
        #expect((outbox?["dropped"] as? [String: Int])?["accountChanged"] == 2, "\(second)")
        #expect(outbox?["drained"] as? Int == 0)
        #expect(host.files.files(of: "alice@example.com").isEmpty)
        #expect(Set(host.files.files(of: "bob@example.com").map(\.name)) == ["one", "two"])
    }
}

@Suite struct DriveMirrorTests {
    @Test func aMirrorDownloadsNoFileWhoseChecksumTheSnapshotKnows() async throws {
        let host = try DriveHost()
        let directory = try TemporaryDirectory()
        let local = directory.file("local")
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        for index in 0..<3 {
            try "value \(index)".write(toFile: local + "/k\(index)", atomically: true, encoding: .utf8)
        }
        let file = directory.file("mirror.yaml")
        try """
        version: 1
        name: drive-mirror
        providers:
          local: { type: directory, path: local }
          drive:
            type: googleDrive
            clientId: ${env:CLIENT_ID}
            clientSecret: ${env:CLIENT_SECRET}
            refreshToken: ${env:TOKEN}
            endpoint: ${env:ENDPOINT}
            tokenEndpoint: ${env:TOKEN_ENDPOINT}
        store:
          providers: [local]
        jobs:
          - { type: mirror, from: local, to: drive }

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let urls = host.server.urls["drive"]!
        let environment = [
            "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!, "ENDPOINT": urls["endpoint"]!,
            "TOKEN_ENDPOINT": urls["tokenEndpoint"]!, "TOKEN": host.signIn("mirror@example.com").refreshToken,
        ]
        func run() async throws -> (counts: [String: Int], downloads: Int) {
            host.server.server.clearLog()
            let report = directory.file("report.json")
            _ = await CommandLineTool(standardOutput: { _ in }, standardError: { _ in }, environment: environment)
                .run(["run", file, "--quiet", "--report", report])
            let data = try Data(contentsOf: URL(fileURLWithPath: report))
            let job = ((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["jobs"] as? [[String: Any]])?
                .first
            let downloads = host.server.server.requestLog.filter { entry in
                entry.queryItems.contains { $0.name == "alt" && $0.value == "media" }
            }
            return (job?["counts"] as? [String: Int] ?? [:], downloads.count)
        }
        #expect(try await run().counts["copied"] == 3)
        // What it uploaded has no checksum in the snapshot yet: each file is downloaded once and compared.
        let second = try await run()
        #expect(second.counts["unchanged"] == 3 && second.downloads == 3, "\(second)")
        // Then the listing's checksums vouch for every file.
        let third = try await run()
        #expect(third.counts["unchanged"] == 3 && third.downloads == 0, "\(third)")
        // A changed source value is uploaded again.
        try "value 1, edited".write(toFile: local + "/k1", atomically: true, encoding: .utf8)
        let fourth = try await run()
        #expect(fourth.counts["updated"] == 1 && fourth.counts["unchanged"] == 2, "\(fourth)")
    }
}

/// Two runs of a pipeline around a run that cannot check who is signed in, and a switch that concerns one of two Drive
/// accounts.
@Suite struct DriveAccountCheckTests {
    let host: DriveHost
    let directory: TemporaryDirectory

    init() throws {
        host = try DriveHost()
        directory = try TemporaryDirectory()
        try #"{"version": 1, "count": 2, "items": {"one": "1", "two": "2"}}"#.write(
            toFile: directory.path + "/items.export.json", atomically: true, encoding: .utf8)
    }

    /// Writes the pipeline `check` with a Drive provider per token variable (named after it, lowercased), mirrored
    /// in the store, and `jobs`; the state directory is the same whatever the jobs.
    ///
    /// The deadline is a minute: these tests need each account check they do not fault to succeed, and in a loaded
    /// full run a 10 s deadline let the first run's check time out, so no identity was recorded to compare with.
    func pipeline(_ tokens: [String], jobs: String) throws -> String {
        let file = directory.path + "/check.yaml"
        let providers = tokens.map { token in
            """
              \(token.lowercased()):
                type: googleDrive
                clientId: ${env:CLIENT_ID}
                clientSecret: ${env:CLIENT_SECRET}
                refreshToken: ${env:\(token)}
                endpoint: ${env:ENDPOINT}
                tokenEndpoint: ${env:TOKEN_ENDPOINT}
                timeoutMs: 60000
            """
        }
        try """
        version: 1
        name: check
        providers:
        \(providers.joined(separator: "\n"))
        store:
          providers: [\(tokens.map { $0.lowercased() }.joined(separator: ", "))]
          writeMode: mirror
        jobs:
          - \(jobs)

        """.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// The emulator's endpoints, with each token variable signed in as the user given.
    func environment(signedIn users: [String: String]) -> [String: String] {
        let urls = host.server.urls["drive"]!
        var environment = [
            "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!, "ENDPOINT": urls["endpoint"]!,
            "TOKEN_ENDPOINT": urls["tokenEndpoint"]!,
        ]
        for (token, user) in users { environment[token] = host.signIn(user).refreshToken }
        return environment
    }

    /// Runs `file` with each token variable signed in as the user given, and returns the report.
    func run(_ file: String, signedIn users: [String: String]) async throws -> [String: Any] {
        let report = directory.path + "/report-\(UUID().uuidString).json"
        _ = await CommandLineTool(
            standardOutput: { _ in }, standardError: { _ in }, environment: environment(signedIn: users)
        )
        .run(["run", file, "--quiet", "--report", report])
        let data = try Data(contentsOf: URL(fileURLWithPath: report))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func names(_ user: String) -> Set<String> { Set(host.files.files(of: user).map(\.name)) }

    /// Every upload answered 429 with `Retry-After: 0`: the write is queued, and due again straight away.
    let uploadsRefused = HTTPFaultRule.tooManyRequests(retryAfterSeconds: 0, route: "POST /upload/drive/v3/files")

    @Test func writesQueuedForAliceWaitWhileARunCannotCheckWhoIsSignedIn() async throws {
        // Alice's run cannot upload: the two writes wait in the outbox, due again at once (Retry-After: 0), so
        // only the account check keeps the next run from sending them.
        host.server.server.setFaultPlan(HTTPFaultPlan([uploadsRefused]))
        let importing = try pipeline(["TOKEN"], jobs: "{ type: import, path: items.export.json, to: store }")
        let first = try await run(importing, signedIn: ["TOKEN": "alice@example.com"])
        #expect((first["outbox"] as? [String: Any])?["pendingAfter"] as? Int == 2, "\(first)")

        // Bob signed in meanwhile, and about.get answers 503 to every attempt of the identity check (later calls,
        // the availability probe among them, succeed): uploads would work, but nothing of Alice's may go to Bob.
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: Array(1...5), route: "GET /drive/v3/about")]))
        let flushing = try pipeline(["TOKEN"], jobs: "{ type: flush }")
        let unsure = try await run(flushing, signedIn: ["TOKEN": "bob@example.com"])
        let outbox = unsure["outbox"] as? [String: Any]
        #expect(outbox?["drained"] as? Int == 0, "\(unsure)")
        #expect(outbox?["pendingAfter"] as? Int == 2)
        #expect((outbox?["dropped"] as? [String: Int])?.isEmpty == true)
        #expect(unsure["status"] as? String == "queued")
        let line = (unsure["providers"] as? [[String: Any]])?.first { $0["id"] as? String == "token" }
        let held = line?["outboxHeld"] as? [String: Any]
        #expect(held?["entries"] as? Int == 2, "\(unsure)")
        #expect(held?["code"] as? String == "ERR_SERVER")
        #expect((held?["message"] as? String)?.contains("could not be checked") == true)
        #expect(names("bob@example.com").isEmpty)

        // `outbox flush` opens the pipeline the same way, and says what it held and why.
        host.server.server.setFaultPlan(
            HTTPFaultPlan([.errors(503, onCalls: Array(1...5), route: "GET /drive/v3/about")]))
        let said = Mutex("")
        let status = await CommandLineTool(
            standardOutput: { _ in }, standardError: { text in said.withLock { $0 += text } },
            environment: environment(signedIn: ["TOKEN": "bob@example.com"])
        )
        .run(["outbox", "flush", flushing])
        #expect(status == .success)
        let output = said.withLock { $0 }
        #expect(output.contains("drained 0, remaining 2, dropped 0"), "\(output)")
        #expect(output.contains("held 2 for token: the account of `token` could not be checked (ERR_SERVER"))
        #expect(names("bob@example.com").isEmpty)
        host.server.server.clearFaultPlan()

        // Alice again, checked: her writes reach her Drive.
        let checked = try await run(flushing, signedIn: ["TOKEN": "alice@example.com"])
        #expect((checked["outbox"] as? [String: Any])?["drained"] as? Int == 2, "\(checked)")
        #expect(names("alice@example.com") == ["one", "two"])
        #expect(names("bob@example.com").isEmpty)
    }

    @Test func writesQueuedWhileNoRunCouldEverCheckTheAccountNeverReachTheNextOne() async throws {
        // The very first run cannot check who is signed in (about.get answers 503 to every attempt) and cannot
        // upload: Alice's two writes wait in the outbox, for an account no run has recorded.
        host.server.server.setFaultPlan(
            HTTPFaultPlan([uploadsRefused, .errors(503, onCalls: Array(1...5), route: "GET /drive/v3/about")]))
        let importing = try pipeline(["TOKEN"], jobs: "{ type: import, path: items.export.json, to: store }")
        let first = try await run(importing, signedIn: ["TOKEN": "alice@example.com"])
        #expect((first["outbox"] as? [String: Any])?["pendingAfter"] as? Int == 2, "\(first)")
        host.server.server.clearFaultPlan()

        // Bob's run can check: the writes were made for an account nobody knows, so they count as another
        // account's and are dropped, not sent to Bob.
        let flushing = try pipeline(["TOKEN"], jobs: "{ type: flush }")
        let second = try await run(flushing, signedIn: ["TOKEN": "bob@example.com"])
        let outbox = second["outbox"] as? [String: Any]
        #expect((outbox?["dropped"] as? [String: Int]) == ["accountChanged": 2], "\(second)")
        #expect(outbox?["drained"] as? Int == 0)
        #expect(outbox?["pendingAfter"] as? Int == 0)
        #expect(names("bob@example.com").isEmpty)

        // Bob is now the recorded account: his own writes go through as usual.
        let reimporting = try pipeline(["TOKEN"], jobs: "{ type: import, path: items.export.json, to: store }")
        let third = try await run(reimporting, signedIn: ["TOKEN": "bob@example.com"])
        #expect((third["outbox"] as? [String: Any])?["pendingAfter"] as? Int == 0, "\(third)")
        #expect(names("bob@example.com") == ["one", "two"], "\(third)")
    }

    @Test func aSwitchOfOneOfTwoAccountsAbandonsOnlyItsWrites() async throws {
        host.server.server.setFaultPlan(HTTPFaultPlan([uploadsRefused]))
        let importing = try pipeline(
            ["WORK", "HOME"], jobs: "{ type: import, path: items.export.json, to: store }")
        let first = try await run(importing, signedIn: ["WORK": "alice@example.com", "HOME": "carol@example.com"])
        #expect((first["outbox"] as? [String: Any])?["pendingAfter"] as? Int == 4, "\(first)")
        host.server.server.clearFaultPlan()

        // `work` is Bob's now; `home` is still Carol's, so her two writes are still hers to receive.
        let flushing = try pipeline(["WORK", "HOME"], jobs: "{ type: flush }")
        let second = try await run(flushing, signedIn: ["WORK": "bob@example.com", "HOME": "carol@example.com"])
        let outbox = second["outbox"] as? [String: Any]
        #expect((outbox?["dropped"] as? [String: Int]) == ["accountChanged": 2], "\(second)")
        #expect(outbox?["drained"] as? Int == 2)
        #expect(outbox?["pendingAfter"] as? Int == 0)
        #expect(names("carol@example.com") == ["one", "two"])
        #expect(names("bob@example.com").isEmpty)
        #expect(names("alice@example.com").isEmpty)
    }
}

/// The built `cloudsync-emulator` and `cloudsync` running `pipelines/drive-backup.yaml` as the README shows.
@Suite(.timeLimit(.minutes(10))) struct DriveExamplePipelineTests {
    func cloudsync(_ arguments: [String], directory: String, environment: [String: String]) async throws
        -> ProcessResult
    {
        var merged = ProcessInfo.processInfo.environment
        merged.merge(environment) { $1 }
        return try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), arguments, environment: merged, currentDirectory: directory)
    }

    func startEmulator(data: String) async throws -> (RunningProcess, [String: String]) {
        let emulator = try RunningProcess(
            try ProcessRunner.builtProduct("cloudsync-emulator"), ["--drive", "--data", data])
        let line = try #require(await emulator.line())
        let urls = try #require(
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: [String: String]])?["drive"])
        return (
            emulator,
            [
                "GDRIVE_ENDPOINT": urls["endpoint"]!, "GDRIVE_TOKEN_ENDPOINT": urls["tokenEndpoint"]!,
                "GDRIVE_AUTH_ENDPOINT": urls["authEndpoint"]!, "GDRIVE_REFRESH_TOKEN": urls["refreshToken"]!,
            ]
        )
    }

    @Test func drivebackupRunsAgainstTheEmulatorAndItsFilesSurviveARestart() async throws {
        let directory = try TemporaryDirectory()
        let pipelines = Repository.root + "/pipelines"
        for item in ["demo.yaml", "drive-backup.yaml", "demo-data", "keys"] {
            try FileManager.default.copyItem(atPath: pipelines + "/" + item, toPath: directory.path + "/" + item)
        }
        let demo = try await cloudsync(["run", "demo.yaml", "--quiet"], directory: directory.path, environment: [:])
        #expect(demo.status == 0, "\(demo.standardError)")

        let data = directory.path + "/emulator"
        var (emulator, environment) = try await startEmulator(data: data)
        let backup = try await cloudsync(
            ["run", "drive-backup.yaml", "--quiet", "--report", "-"], directory: directory.path,
            environment: environment)
        #expect(backup.status == 0, "\(backup.standardOutput)\(backup.standardError)")
        #expect(!backup.standardOutput.contains(environment["GDRIVE_REFRESH_TOKEN"]!))
        #expect(!backup.standardError.contains(environment["GDRIVE_REFRESH_TOKEN"]!))
        emulator.signal(SIGTERM)
        #expect(await emulator.exited().status == 0)
        let saved = try String(contentsOfFile: data + "/drive.json", encoding: .utf8)
        #expect(saved.contains("\"appDataFolder\""))

        (emulator, environment) = try await startEmulator(data: data)
        let verify = try await cloudsync(
            ["run", "drive-backup.yaml", "--quiet", "--report", "-"], directory: directory.path,
            environment: environment)
        #expect(verify.status == 0, "\(verify.standardOutput)\(verify.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(verify.standardOutput.utf8)) as? [String: Any])
        let jobs = report["jobs"] as? [[String: Any]] ?? []
        #expect(jobs.count == 2)
        #expect(jobs.allSatisfy { ($0["status"] as? String) == "ok" }, "\(jobs)")
        // The restarted emulator still had every file the first run wrote, so the mirror wrote none, and verify read
        // them all back.
        let counts = jobs.map { $0["counts"] as? [String: Int] ?? [:] }
        #expect(counts.first?["copied"] == 0 && counts.first?["updated"] == 0, "\(counts)")
        #expect(counts.first?["unchanged"] ?? 0 > 300)
        #expect(counts.last?["checked"] == counts.first?["unchanged"])
        #expect(counts.last?["failed"] == 0)
        // No twins either.
        emulator.signal(SIGTERM)
        #expect(await emulator.exited().status == 0)
        let state = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: data + "/drive.json")))
        let accounts = ((state as? [String: Any])?["files"] as? [String: Any])?["accounts"] as? [String: Any]
        let files = (accounts?.values.first as? [String: Any])?["files"] as? [String: Any]
        #expect(files?.count == counts.first?["unchanged"])
    }
}
