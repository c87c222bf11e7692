import CloudSync
import CloudSyncAuth
import CloudSyncPipeline
import CloudSyncPipelineState
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Synchronization
import Testing

@testable import CloudSyncCLI

/// A provider type that signs in as Google Drive will: OAuth 2.0 for installed apps, here against the emulator.
///
/// No built-in type signs in yet, so `login` is tested through this one.
struct SigningInTestFactory: ProviderFactory {
    struct Configuration: Sendable {
        let client: OAuthClientConfiguration
        var requireSignIn = false
    }

    var type: String { "signingIn" }
    var summary: String { "memory, behind a Google OAuth sign-in (tests only)" }
    var fields: [ProviderField] {
        [
            ProviderField("clientId", .text, required: true, summary: "the OAuth client id"),
            ProviderField("clientSecret", .text, secret: true, summary: "the OAuth client secret"),
            ProviderField("authEndpoint", .text, required: true, summary: "the authorization endpoint"),
            ProviderField("tokenEndpoint", .text, required: true, summary: "the token endpoint"),
            ProviderField("requireSignIn", .boolean, summary: "refuse to open without a kept refresh token"),
        ]
    }

    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        guard let auth = URL(string: values.text("authEndpoint") ?? ""),
            let token = URL(string: values.text("tokenEndpoint") ?? "")
        else { throw ProviderConfigurationError("the endpoints must be URLs") }
        return Configuration(
            client: OAuthClientConfiguration(
                clientID: values.text("clientId") ?? "", clientSecret: values.text("clientSecret"),
                authorizationEndpoint: auth, tokenEndpoint: token,
                scopes: ["https://www.googleapis.com/auth/drive.appdata"]),
            requireSignIn: values.boolean("requireSignIn") ?? false)
    }

    func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities() }

    func signIn(for configuration: Configuration) -> (any ProviderSignIn)? {
        InstalledAppSignIn(client: configuration.client)
    }

    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        if configuration.requireSignIn, try context.state.credential(.oauthRefreshToken) == nil {
            throw CloudSyncError(.notSignedIn, "no refresh token kept; run \(context.loginCommand)")
        }
        return MemoryProvider(id: context.providerID)
    }
}

/// `cloudsync login` and `logout`, in-process against an in-process Google emulator: the test is the person, and
/// opens the printed address in a "browser" that follows the redirect to the loopback listener.
@Suite struct LoginCommandTests {
    let directory: TemporaryDirectory
    let host: EmulatorServer
    let oauth: GoogleOAuthEmulator
    let file: String
    let environment: [String: String]

    init() throws {
        directory = try TemporaryDirectory()
        oauth = GoogleOAuthEmulator()
        host = try EmulatorServer(services: [DriveEmulator(oauth: oauth)])
        let urls = host.urls["drive"]!
        environment = [
            "CLIENT_ID": urls["clientId"]!, "CLIENT_SECRET": urls["clientSecret"]!,
            "AUTH": urls["authEndpoint"]!, "TOKEN": urls["tokenEndpoint"]!,
        ]
        file = directory.path + "/cloud.yaml"
        try """
        version: 1
        name: cloud
        providers:
          drive:
            type: signingIn
            clientId: ${env:CLIENT_ID}
            clientSecret: ${env:CLIENT_SECRET}
            authEndpoint: ${env:AUTH}
            tokenEndpoint: ${env:TOKEN}
          local: { type: sqlite, path: data/local.db, create: true }
        store:
          providers: [local, drive]
        jobs:
          - type: sync

        """.write(toFile: file, atomically: true, encoding: .utf8)
    }

    var statePath: String { directory.path + "/.cloudsync/cloud/state.db" }

    /// Runs `cloudsync` in-process with the test provider type; the person at the terminal does `person` with the
    /// address to open.
    ///
    /// `environment` replaces the suite's variables when given.
    func run(
        _ arguments: [String], pasting: [String] = [], environment: [String: String]? = nil,
        person: (@Sendable (URL) async -> Void)? = nil
    ) async -> (ExitCode, String, String) {
        let output = Mutex("")
        let errors = Mutex("")
        let input = Mutex(pasting)
        var registry = BuiltInProviders.registry
        registry.register(SigningInTestFactory())
        let tool = CommandLineTool(
            standardOutput: { text in output.withLock { $0 += text } },
            standardError: { text in
                errors.withLock { $0 += text }
                let address = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
                    $0.hasPrefix("http://") && $0.contains("?")
                }
                if let person, let url = address.flatMap(URL.init(string:)) { Task { await person(url) } }
            },
            standardInput: { input.withLock { $0.isEmpty ? nil : $0.removeFirst() } },
            environment: environment ?? self.environment, registry: registry)
        let status = await tool.run(arguments)
        return (status, output.withLock { $0 }, errors.withLock { $0 })
    }

    func storedRefreshToken() throws -> String? {
        let database = try StateDatabase(path: statePath, readOnly: true)
        defer { database.close() }
        return try ProviderState(provider: "drive", store: database).credential(.oauthRefreshToken)
    }

    @Test func loginKeepsTheRefreshTokenInTheStateDatabaseAndLogoutForgetsIt() async throws {
        defer { host.server.stop() }
        let (status, output, errors) = await run(["login", file, "--provider", "drive"]) { url in
            _ = try? await TestBrowser.open(url)
        }
        #expect(status == .success, "\(errors)")
        #expect(output.isEmpty)
        #expect(errors.contains("Signing in provider 'drive' (signingIn): OAuth 2.0 for installed apps"))
        #expect(errors.contains("Open this address in a browser"))
        #expect(errors.contains("Signed in: the OAuth refresh token of provider 'drive' is kept in \(statePath)."))

        let refreshToken = try #require(try storedRefreshToken())
        #expect(oauth.isActive(refreshToken: refreshToken))
        #expect(!errors.contains(refreshToken))
        #expect(!errors.contains(environment["CLIENT_SECRET"]!))
        let mode = try FileManager.default.attributesOfItem(atPath: statePath)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        // The provider finds it in its state on the next run, exactly as stored.
        let refreshed = try await OAuthTokenClient(
            configuration: OAuthClientConfiguration(
                clientID: environment["CLIENT_ID"]!, clientSecret: environment["CLIENT_SECRET"],
                authorizationEndpoint: URL(string: environment["AUTH"]!)!,
                tokenEndpoint: URL(string: environment["TOKEN"]!)!, scopes: [])
        ).refresh(refreshToken)
        #expect(!refreshed.accessToken.isEmpty)

        let (out, outOutput, outErrors) = await run(["logout", file, "--provider", "drive"])
        #expect(out == .success)
        #expect(outOutput.isEmpty)
        #expect(outErrors == "Signed out: forgot the OAuth refresh token of provider 'drive'.\n")
        #expect(try storedRefreshToken() == nil)
        let (again, _, againErrors) = await run(["logout", file, "--provider", "drive"])
        #expect(again == .success)
        #expect(againErrors.contains("was not signed in"))
    }

    /// Forgetting one provider's credentials needs neither the other providers' variables nor the run's
    /// environment: a variable only they read is stood in for, one the provider itself or the state reads is not.
    @Test func logoutNeedsNoVariableOnlyOtherProvidersRead() async throws {
        defer { host.server.stop() }
        let other = directory.path + "/two.yaml"
        func write(state: String) throws {
            try """
            version: 1
            name: two
            \(state)
            providers:
              drive:
                type: signingIn
                clientId: ${env:CLIENT_ID}
                clientSecret: ${env:CLIENT_SECRET}
                authEndpoint: ${env:AUTH}
                tokenEndpoint: ${env:TOKEN}
              bucket:
                type: s3
                bucket: ${env:OTHER_BUCKET}
                endpoint: http://127.0.0.1:9
                accessKeyId: ${env:OTHER_KEY_ID}
                secretAccessKey: ${env:OTHER_SECRET}
            store: { providers: [drive, bucket] }

            """.write(toFile: other, atomically: true, encoding: .utf8)
        }
        try write(state: "")
        let state = directory.path + "/.cloudsync/two"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        do {
            let database = try StateDatabase(path: state + "/state.db")
            try ProviderState(provider: "drive", store: database).replace(.oauthRefreshToken, with: "1//kept")
            database.close()
        }
        var registry = BuiltInProviders.registry
        registry.register(SigningInTestFactory())
        func logout(_ environment: [String: String]) async -> (ExitCode, String) {
            let errors = Mutex("")
            let tool = CommandLineTool(
                standardOutput: { _ in }, standardError: { text in errors.withLock { $0 += text } },
                environment: environment, registry: registry)
            let status = await tool.run(["logout", other, "--provider", "drive"])
            return (status, errors.withLock { $0 })
        }
        // The drive provider's own variable missing: still an error naming it.
        var withoutOwn = environment
        withoutOwn["CLIENT_ID"] = nil
        let (refused, refusal) = await logout(withoutOwn)
        #expect(refused == .usage)
        #expect(refusal.contains("CLIENT_ID is not set"))
        // The bucket's three missing: signed out all the same.
        let (status, errors) = await logout(environment)
        #expect(status == .success, "\(errors)")
        #expect(errors == "Signed out: forgot the OAuth refresh token of provider 'drive'.\n")
        let database = try StateDatabase(path: state + "/state.db", readOnly: true)
        #expect(try ProviderState(provider: "drive", store: database).credential(.oauthRefreshToken) == nil)
        database.close()
        // A variable the state reads is never stood in for, even when another provider reads it too.
        try write(state: "state: .cloudsync/${env:OTHER_BUCKET}")
        let (stateRefused, stateRefusal) = await logout(environment)
        #expect(stateRefused == .usage)
        #expect(stateRefusal.contains("OTHER_BUCKET is not set"))
    }

    /// One sign-in kept as a named account serves every pipeline whose provider names it, and only those; the
    /// pipeline that signed in keeps nothing of it in its own state.
    @Test func anAccountSignedInOnceServesEveryPipelineThatNamesIt() async throws {
        defer { host.server.stop() }
        let accountsDirectory = directory.path + "/accounts"
        var environment = self.environment
        environment["CLOUDSYNC_ACCOUNTS_DIR"] = accountsDirectory
        func cloudsync(_ arguments: [String], person: (@Sendable (URL) async -> Void)? = nil) async
            -> (ExitCode, String, String)
        {
            await run(arguments, environment: environment, person: person)
        }
        func pipeline(_ name: String, account: String) throws -> String {
            let path = directory.path + "/\(name).yaml"
            try """
            version: 1
            name: \(name)
            providers:
              mine:
                type: signingIn
                clientId: ${env:CLIENT_ID}
                clientSecret: ${env:CLIENT_SECRET}
                authEndpoint: ${env:AUTH}
                tokenEndpoint: ${env:TOKEN}
                requireSignIn: true
                account: \(account)
              local: { type: memory }
            store: { providers: [local] }
            jobs:
              - { type: migrate, from: mine, to: local }

            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        let (status, _, errors) = await cloudsync(["login", file, "--provider", "drive", "--account", "work"]) { url in
            _ = try? await TestBrowser.open(url)
        }
        #expect(status == .success, "\(errors)")
        #expect(errors.contains("is kept as account 'work' in \(accountsDirectory)/accounts.db"))
        let keptHere = FileManager.default.fileExists(atPath: statePath) ? try storedRefreshToken() : nil
        #expect(keptHere == nil, "the signing-in pipeline kept the account's token itself")
        let fileMode = try FileManager.default.attributesOfItem(atPath: accountsDirectory + "/accounts.db")[
            .posixPermissions]
        let directoryMode = try FileManager.default.attributesOfItem(atPath: accountsDirectory)[.posixPermissions]
        #expect((fileMode as? NSNumber)?.intValue == 0o600)
        #expect((directoryMode as? NSNumber)?.intValue == 0o700)

        let (listed, list, _) = await cloudsync(["accounts", "list", "--json"])
        #expect(listed == .success)
        let accounts = try #require(try JSONSerialization.jsonObject(with: Data(list.utf8)) as? [[String: Any]])
        #expect(accounts.count == 1)
        #expect(accounts.first?["name"] as? String == "work")
        #expect(accounts.first?["type"] as? String == "signingIn")
        #expect(accounts.first?["credentials"] as? [String] == ["signIn.oauthRefreshToken"])
        #expect(!list.contains("1//"), "accounts list printed a token")

        // A dry run reads the account and leaves its file exactly as it was.
        let before = try Data(contentsOf: URL(fileURLWithPath: accountsDirectory + "/accounts.db"))
        let beforeModified =
            try FileManager.default.attributesOfItem(
                atPath: accountsDirectory + "/accounts.db")[.modificationDate] as? Date
        let (dry, _, dryErrors) = await cloudsync(
            ["run", try pipeline("dry", account: "work"), "--dry-run", "--quiet", "--report", "-"])
        #expect(dry == .success, "\(dryErrors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: accountsDirectory + "/accounts.db")) == before)
        #expect(
            try FileManager.default.attributesOfItem(atPath: accountsDirectory + "/accounts.db")[.modificationDate]
                as? Date == beforeModified)
        let (planned, plan, _) = await cloudsync(["plan", try pipeline("first", account: "work")])
        #expect(planned == .success)
        #expect(plan.contains("account work (signs in with the named account)"), "\(plan)")
        // Two other pipelines naming the account sign in with it; one naming another account does not.
        for name in ["first", "second"] {
            let (ran, _, runErrors) = await cloudsync([
                "run", try pipeline(name, account: "work"), "--quiet", "--report", "-",
            ])
            #expect(ran == .success, "\(name): \(runErrors)")
        }
        let (stranger, strangerReport, _) = await cloudsync([
            "run", try pipeline("stranger", account: "home"), "--quiet", "--report", "-",
        ])
        #expect(stranger == .jobError)
        #expect(strangerReport.contains("--provider mine --account home"), "the sign-in advice lacks the account")

        // logout of a pipeline whose provider names the account signs every pipeline out of it.
        let (out, _, outErrors) = await cloudsync([
            "logout", try pipeline("first", account: "work"), "--provider", "mine",
        ])
        #expect(out == .success)
        #expect(outErrors.contains("of account 'work', for every pipeline that uses it"))
        let (after, _, _) = await cloudsync([
            "run", try pipeline("second", account: "work"), "--quiet", "--report", "-",
        ])
        #expect(after == .jobError)
        let (removed, _, removeErrors) = await cloudsync(["accounts", "remove", "work"])
        #expect(removed == .success)
        #expect(removeErrors.contains("was not kept"))
    }

    @Test func noBrowserReadsThePastedRedirectAddress() async throws {
        defer { host.server.stop() }
        // The person opens the address elsewhere and pastes where it led; nothing reaches the listener.
        let pasted = Mutex<[String]>([])
        let ready = DispatchSemaphore(value: 0)
        let tool: @Sendable (URL) async -> Void = { url in
            if let answer = try? await TestBrowser.fetchWithoutRedirect(url), let location = answer.headers["Location"]
            {
                pasted.withLock { $0.append(location) }
            }
            ready.signal()
        }
        var registry = BuiltInProviders.registry
        registry.register(SigningInTestFactory())
        let errors = Mutex("")
        let command = CommandLineTool(
            standardOutput: { _ in },
            standardError: { text in
                errors.withLock { $0 += text }
                if let line = text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }).first(
                    where: {
                        $0.hasPrefix("http://") && $0.contains("?")
                    }), let url = URL(string: line)
                {
                    Task { await tool(url) }
                }
            },
            standardInput: {
                ready.wait()
                return pasted.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            }, environment: environment, registry: registry)
        let status = await command.run(["login", file, "--provider", "drive", "--no-browser"])
        #expect(status == .success, "\(errors.withLock { $0 })")
        #expect(errors.withLock { $0 }.contains("paste that whole address here"))
        #expect(try storedRefreshToken() != nil)
    }

    @Test func aRefusedSignInExitsOneAndKeepsNothing() async throws {
        defer { host.server.stop() }
        oauth.approves = false
        let (status, _, errors) = await run(["login", file, "--provider", "drive"]) { url in
            _ = try? await TestBrowser.open(url)
        }
        #expect(status == .failure)
        #expect(
            errors.contains(
                "Error: the sign-in of provider 'drive' failed: ERR_NOT_SIGNED_IN: the authorization server refused: "
                    + "access_denied"))
        #expect(!FileManager.default.fileExists(atPath: statePath))
    }

    @Test(arguments: [
        (
            ["login", "--provider", "drve"],
            "no provider 'drve' in FILE; its providers: drive, local; did you mean 'drive'?",
            "login"
        ),
        (
            ["logout", "--provider", "local"],
            "provider 'local' (sqlite) needs no sign-in; logout is for providers that sign in to an account in a browser",
            "logout"
        ),
        (
            ["login", "--provider", "local"],
            "provider 'local' (sqlite) needs no sign-in; login is for providers that sign in to an account in a browser",
            "login"
        ),
        (["login"], "missing expected argument '--provider ID'", "login"),
    ])
    func aProviderThatCannotSignInIsAUsageError(_ words: [String], _ message: String, _ command: String) async {
        defer { host.server.stop() }
        let arguments = [words[0], file] + words.dropFirst()
        let (status, output, errors) = await run(arguments)
        #expect(status == .usage)
        #expect(output.isEmpty)
        let usage =
            command == "login"
            ? "cloudsync login FILE --provider ID [--account NAME] [--no-browser]"
            : "cloudsync logout FILE --provider ID"
        #expect(
            errors
                == "Error: \(message.replacingOccurrences(of: "FILE", with: file))\nUsage: \(usage)\n  "
                + "See 'cloudsync help \(command)'.\n")
    }

    @Test func loginWaitsForNoRunningRun() async throws {
        defer { host.server.stop() }
        let state = directory.path + "/.cloudsync/cloud"
        let held = try HeldRunLock(state: state)
        defer { withExtendedLifetime(held) {} }
        let (status, _, errors) = await run(["login", file, "--provider", "drive"])
        #expect(status == .locked)
        #expect(errors.contains("cloud is running (process \(getpid())"))
        let (out, _, outErrors) = await run(["logout", file, "--provider", "drive"])
        #expect(out == .success)
        #expect(outErrors.contains("was not signed in"))
    }
}
