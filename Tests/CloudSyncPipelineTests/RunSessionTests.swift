import CloudSync
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncPipeline
@testable import CloudSyncRunner

/// A provider type defined outside the package's provider modules, as a plug-in would be: an account name it reports
/// as its identity, a secret token it keeps in the pipeline's state, a switch that makes every write fail as if
/// offline, and one that makes the identity check fail as a server answering 503 would.
struct AccountProviderFactory: ProviderFactory {
    struct Configuration: Sendable {
        var account: String
        var token: String
        var offline: Bool
        var identityFails: Bool
    }

    var type: String { "account" }
    var summary: String { "a test provider with an account" }
    var fields: [ProviderField] {
        [
            ProviderField("account", .text, required: true, summary: "who is signed in"),
            ProviderField("token", .text, secret: true, summary: "the credential"),
            ProviderField("offline", .boolean, defaultValue: "false", summary: "every write fails as if offline"),
            ProviderField(
                "identityFails", .boolean, defaultValue: "false", summary: "the account check answers 503"),
            ProviderField("mode", .choice(["fast", "slow"]), defaultValue: "fast", summary: "a word"),
        ]
    }

    func configuration(from values: ProviderFieldValues) throws(ProviderConfigurationError) -> Configuration {
        if values.text("account") == "nobody" {
            throw ProviderConfigurationError(field: "account", "nobody cannot sign in; name a real account")
        }
        return Configuration(
            account: values.text("account") ?? "", token: values.text("token") ?? "",
            offline: values.boolean("offline") ?? false, identityFails: values.boolean("identityFails") ?? false)
    }

    func capabilities(of configuration: Configuration) -> ProviderCapabilities { ProviderCapabilities() }

    func make(_ configuration: Configuration, context: ProviderContext) throws(CloudSyncError) -> any Provider {
        try context.state.set(configuration.token, for: "token")
        context.logger.log(.info, "signed in with token \(configuration.token)")
        return AccountProvider(
            wrapped: MemoryProvider(id: context.providerID, metrics: context.metrics), account: configuration.account,
            offline: configuration.offline, identityFails: configuration.identityFails)
    }
}

struct AccountProvider: ForwardingProvider {
    let wrapped: any Provider
    let account: String
    let offline: Bool
    var identityFails = false

    func set(_ items: [KeyValue]) async throws -> [Result<Void, CloudSyncError>] {
        if offline { throw CloudSyncError(.offline, "unplugged") }
        return try await wrapped.set(items)
    }
    func accountIdentity() async throws -> String? {
        if identityFails { throw CloudSyncError(.server, "the account service answered 503") }
        return account
    }
}

private var registry: ProviderRegistry {
    var registry = BuiltInProviders.registry
    registry.register(AccountProviderFactory())
    return registry
}

private func compile(
    _ source: String, in directory: TemporaryDirectory, environment: [String: String] = [:], state: TestState? = nil
) throws -> CompiledPipeline {
    let source = state?.applied(to: source) ?? source
    let environment = state?.environment(environment) ?? environment
    let spec = try PipelineLoader.load(
        source: source, file: "p.yaml", directory: directory.path, registry: registry, environment: environment)
    return try PipelineCompiler.compile(spec, environment: environment)
}

private func accountPipeline(
    _ account: String, offline: Bool = false, identityFails: Bool = false, codec: Bool = false
) -> String {
    """
    version: 1
    name: accounts
    providers:
      cloud: { type: account, account: \(account), token: "${env:TOKEN}", offline: \(offline)\(identityFails ? ", identityFails: true" : "") }
    store:
      providers: [cloud]
    \(codec ? "  codec: vault\ncodecs:\n  vault:\n    type: xchacha20poly1305\n    keys: [{ id: k1, env: VAULT_KEY }]\n" : "")
    """
}

@Suite struct ProviderRegistryTests {
    @Test func aRegisteredTypeIsLoadedPlannedAndInTheSchemaWithItsSecretHidden() throws {
        let directory = try TemporaryDirectory()
        let compiled = try compile(accountPipeline("alice"), in: directory, environment: ["TOKEN": "s3cr3t-token"])
        let provider = compiled.spec.providers[0]
        #expect(provider.type == "account")
        #expect(provider.secrets == ["s3cr3t-token"])
        let plan = PipelinePlan(compiled)
        #expect(plan.providers[0].settings["token"] == "${env:TOKEN}")
        #expect(plan.providers[0].settings["account"] == "alice")
        #expect(!plan.json().contains("s3cr3t-token") && !plan.text().contains("s3cr3t-token"))
        let schema = PipelineSchema.json(registry: registry)
        #expect(schema.contains(#"{ "const": "account" }"#))
        #expect(
            schema.contains(
                #""mode": { "description": "A word. Default: fast.", "anyOf": [{ "enum": ["fast", "slow"] }, "#
                    + #"{ "type": "string", "pattern": "\\$\\{(env|file):" }] }"#))
        #expect(try JSONSerialization.jsonObject(with: Data(schema.utf8)) is [String: Any])
        // A secret written into the file itself is never shown either.
        let literal = try compile(
            accountPipeline("alice").replacingOccurrences(of: "\"${env:TOKEN}\"", with: "in-the-file"), in: directory)
        #expect(PipelinePlan(literal).providers[0].settings["token"] == "<secret given in the file>")
    }

    @Test func fieldsAreCheckedByKindAndTheFactoryChecksTheWhole() throws {
        let directory = try TemporaryDirectory()
        let source = accountPipeline("nobody").replacingOccurrences(
            of: "offline: false", with: "offline: maybe, mode: quick")
        let error = #expect(throws: PipelineError.self) {
            try compile(source, in: directory, environment: ["TOKEN": "t"])
        }
        let messages = error?.diagnostics.map(\.message) ?? []
        #expect(messages.contains("`offline` in provider `cloud` must be true or false; found \"maybe\""))
        #expect(messages.contains("`mode` in provider `cloud` must be one of fast, slow; found \"quick\""))
        // The factory's own check runs only once every field is valid alone.
        #expect(!messages.contains { $0.contains("nobody cannot sign in") })
        let whole = #expect(throws: PipelineError.self) {
            try compile(accountPipeline("nobody"), in: directory, environment: ["TOKEN": "t"])
        }
        #expect(whole?.diagnostics.map(\.message) == ["provider `cloud`: nobody cannot sign in; name a real account"])
    }
}

/// Every test runs against both state implementations: the directory beside the pipeline and a PostgreSQL schema.
@Suite struct RunSessionTests {
    @Test(arguments: StateKind.allCases)
    func anAccountSwitchBetweenRunsAbandonsTheOutbox(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let environment = ["TOKEN": "t"]
        let first = try await RunSession.open(
            try compile(accountPipeline("alice", offline: true), in: directory, environment: environment, state: state))
        let receipt = try await first.store.set("v", forKey: "k")
        #expect(receipt.queued == ["cloud"])
        await first.close()

        let same = try await RunSession.open(
            try compile(accountPipeline("alice"), in: directory, environment: environment, state: state))
        #expect(same.outbox?.count == 1)
        #expect(same.dropped.isEmpty)
        await same.close()

        let switched = try await RunSession.open(
            try compile(accountPipeline("bob", offline: true), in: directory, environment: environment, state: state))
        #expect(switched.outbox?.count == 0)
        #expect(switched.dropped == ["accountChanged": 1])
        #expect(try switched.stateDatabase?.identity(of: "cloud") == "bob")
        await switched.close()
    }

    @Test(arguments: StateKind.allCases)
    func providerValuesAreEncryptedWithThePipelinesCodec(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let environment = ["TOKEN": "refresh-token-123", "VAULT_KEY": key]
        let compiled = try compile(
            accountPipeline("alice", codec: true), in: directory, environment: environment, state: state)
        let session = try await RunSession.open(compiled)
        #expect(try session.stateDatabase?.value(provider: "cloud", name: "token") == "refresh-token-123")
        await session.close()
        let raw = try await state.rawProviderValues(compiled)
        #expect(raw.count == 1)
        #expect(raw[0].hasPrefix("cs1:k1:raw:") && !raw[0].contains("refresh-token-123"))
    }

    @Test(arguments: StateKind.allCases)
    func aSecondWritingSessionIsRefusedUntilTheFirstCloses(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let compiled = try compile(accountPipeline("alice"), in: directory, environment: ["TOKEN": "t"], state: state)
        let first = try await RunSession.open(compiled)
        await #expect {
            _ = try await RunSession.open(compiled)
        } throws: { error in
            switch error as? RunRefusal {
            case .locked(let pid, _)?: return pid == getpid()
            case .lockedElsewhere(let holder, let lock)?:
                return holder?.hasPrefix("process \(getpid()) on \(ProcessInfo.processInfo.hostName) since ") == true
                    && lock.contains("schema \(state.schema)") && !lock.contains(state.url ?? "?")
            default: return false
            }
        }
        // A dry run takes no lock.
        let dry = try await RunSession.open(compiled, access: .dryRun)
        await dry.close()
        await first.close()
        let again = try await RunSession.open(compiled)
        await again.close()
    }

    /// A state database that is not one refuses the run with the state's own error: its code once, its words as they
    /// are (they were wrapped in a second `ERR_CONFIG` whose text began with the first code).
    @Test func aStateDatabaseThatIsNotOneRefusesTheRunWithItsOwnError() async throws {
        let directory = try TemporaryDirectory()
        let compiled = try compile(accountPipeline("alice"), in: directory, environment: ["TOKEN": "t"])
        try FileManager.default.createDirectory(atPath: compiled.spec.state, withIntermediateDirectories: true)
        try String(repeating: "not a database ", count: 100).write(
            toFile: compiled.spec.state + "/state.db", atomically: true, encoding: .utf8)
        await #expect {
            _ = try await RunSession.open(compiled)
        } throws: { error in
            guard let refusal = error as? RunRefusal, case .cannotStart = refusal else { return false }
            return refusal.error.code == .config && !refusal.error.message.contains("ERR_")
                && refusal.error.message.contains(compiled.spec.state + "/state.db")
        }
    }

    /// Each provider's lines start with its id, so one sink (the CLI's `--verbose`) tells providers apart.
    @Test(arguments: StateKind.allCases)
    func theLoggerRedactsTheProvidersSecretsAndNamesTheProvider(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let lines = Protected<[String]>([])
        let logger = ProviderLogger(minimumLevel: .debug) { _, line in lines.withLock { $0.append(line) } }
        let compiled = try compile(
            accountPipeline("alice"), in: directory, environment: ["TOKEN": "tok-XYZ-987"], state: state)
        let session = try await RunSession.open(compiled, logger: logger)
        await session.close()
        #expect(lines.withLock { $0 } == ["cloud: signed in with token <redacted>"])
    }
}

@Suite struct WrapperForwardingTests {
    @Test func theDryRunWrapperForwardsEverythingButWrites() async throws {
        #expect(await ProviderConformanceSuite.runForwarding { DryRunProvider(wrapped: $0) } == [])
    }

    @Test func theAccountWrapperForwardsEverything() async throws {
        #expect(
            await ProviderConformanceSuite.runForwarding {
                AccountProvider(wrapped: $0, account: "probe-account-1", offline: false)
            }
                == [])
    }
}

@Suite struct RunCancellationTests {
    @Test(arguments: StateKind.allCases)
    func cancellingTheRunsTaskStopsAfterTheCurrentBatchAndReportsInterrupted(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let items = (0..<3000).map { "k\($0): v\($0)" }.joined(separator: ", ")
        let compiled = try compile(
            """
            version: 1
            name: cancel
            providers:
              seed: { type: memory, items: { \(items) } }
              primary: { type: sqlite, path: data/p.db, create: true }
            store:
              providers: [primary]
            jobs:
              - { type: migrate, from: seed, to: primary }
              - { type: flush }
            report: { path: report.json }
            """, in: directory, state: state)
        let running = Protected<Task<Result<RunOutcome, RunRefusal>, Never>?>(nil)
        var options = RunOptions()
        options.onProgress = { _, _, _, _ in running.withLock { $0?.cancel() } }
        let runner = PipelineRunner(compiled, options: options)
        let task = Task { () -> Result<RunOutcome, RunRefusal> in
            do throws(RunRefusal) { return .success(try await runner.run()) } catch { return .failure(error) }
        }
        running.withLock { $0 = task }
        let outcome = try await task.value.get()
        #expect(outcome.status == .interrupted)
        #expect(outcome.report.jobs.map(\.status) == [.interrupted, .skipped])
        let copied = outcome.report.jobs[0].counts["copied"] ?? 0
        #expect(copied > 0 && copied < 3000)
        #expect(outcome.report.jobs[0].failures.isEmpty, "no key of the last batch was cut short")
        // Exactly the keys reported copied are in the destination: no batch was left half sent.
        let database = try SQLiteDatabase(path: directory.file("data/p.db"))
        let stored: [Int64] = try await database.read { (db: SQLiteConnection) in
            try db.query("SELECT count(*) FROM kv") { $0.int64(0) }
        }
        #expect(stored == [Int64(copied)])
    }
}

/// Every test runs against both state implementations.
@Suite struct AccountSafetyTests {
    /// A file with two account providers, both offline unless told, and a flush job.
    private func twoAccounts(cloud: String, backup: String, offline: Bool) -> String {
        """
        version: 1
        name: accounts
        providers:
          cloud: { type: account, account: \(cloud), token: "${env:TOKEN}", offline: \(offline) }
          backup: { type: account, account: \(backup), token: "${env:TOKEN}", offline: \(offline) }
        store:
          providers: [cloud, backup]
          writeMode: mirror
        jobs:
          - { type: flush }
        """
    }

    /// A clock an hour behind the runner's, so what a session opened with it queues is due when the runner runs.
    private func anHourAgo() -> ManualClock {
        ManualClock(milliseconds: SystemClock().nowMilliseconds() - 3_600_000)
    }

    @Test(arguments: StateKind.allCases)
    func writesQueuedForAnAccountWaitWhileARunCannotCheckWhoIsSignedIn(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let environment = ["TOKEN": "t"]
        let flushJob = "jobs:\n  - { type: flush }\n"
        // Run 1, an hour ago: alice is signed in, the provider fails writes, so the write waits in the outbox (its
        // retry due long before run 2).
        let first = try await RunSession.open(
            try compile(accountPipeline("alice", offline: true), in: directory, environment: environment, state: state),
            clock: anHourAgo())
        #expect(try await first.store.set("v", forKey: "k").queued == ["cloud"])
        await first.close()

        // Run 2: writes would succeed, but the identity check fails: whoever is signed in now may not be alice.
        let unsure = try await PipelineRunner(
            try compile(
                accountPipeline("mallory", identityFails: true) + flushJob, in: directory, environment: environment,
                state: state),
            options: RunOptions()
        ).run()
        #expect(unsure.report.outbox.pendingBefore == 1)
        #expect(unsure.report.outbox.drained == 0)
        #expect(unsure.report.outbox.dropped.isEmpty)
        #expect(unsure.report.outbox.pendingAfter == 1)
        #expect(unsure.status == .queued)
        let line = try #require(unsure.report.providers.first { $0.id == "cloud" })
        #expect(line.bytesWritten == 0, "nothing queued for alice reached the account signed in now")
        let held = try #require(line.outboxHeld)
        #expect(held.entries == 1)
        #expect(held.code == "ERR_SERVER")
        #expect(held.message.contains("the account service answered 503"))
        #expect(held.message.contains("could not be checked"))
        #expect(unsure.report.json().contains(#""outboxHeld""#))
        // The identity recorded stays alice's, so the next run still compares against her.
        let stored = try state.open(
            try compile(accountPipeline("alice"), in: directory, environment: environment, state: state))
        #expect(try stored.identity(of: "cloud") == "alice")
        stored.close()

        // Run 3: alice again, checked: the write is delivered.
        let checked = try await PipelineRunner(
            try compile(accountPipeline("alice") + flushJob, in: directory, environment: environment, state: state),
            options: RunOptions()
        ).run()
        #expect(checked.report.outbox.pendingBefore == 1)
        #expect(checked.report.outbox.drained == 1)
        #expect(checked.report.outbox.pendingAfter == 0)
        #expect(checked.status == .ok)
        let delivered = try #require(checked.report.providers.first { $0.id == "cloud" })
        #expect(delivered.bytesWritten == 1)
        #expect(delivered.outboxHeld == nil)
    }

    @Test(arguments: StateKind.allCases)
    func aRunThatCannotCheckAnAccountNeverSeenBeforeHoldsNothing(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let outcome = try await PipelineRunner(
            try compile(
                accountPipeline("alice", identityFails: true) + "jobs:\n  - { type: flush }\n", in: directory,
                environment: ["TOKEN": "t"], state: state),
            options: RunOptions()
        ).run()
        #expect(outcome.status == .ok)
        #expect(outcome.report.providers.allSatisfy { $0.outboxHeld == nil })
    }

    @Test(arguments: StateKind.allCases)
    func anAccountSwitchAbandonsOnlyTheWritesQueuedForThatProvider(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        let environment = ["TOKEN": "t"]
        let first = try await RunSession.open(
            try compile(
                twoAccounts(cloud: "alice", backup: "carol", offline: true), in: directory, environment: environment,
                state: state),
            clock: anHourAgo())
        #expect(try await first.store.set("v", forKey: "k").queued.sorted() == ["backup", "cloud"])
        await first.close()

        // cloud's account switched to bob; backup is still carol's, so her queued write is still hers to deliver.
        let second = try await PipelineRunner(
            try compile(
                twoAccounts(cloud: "bob", backup: "carol", offline: false), in: directory, environment: environment,
                state: state),
            options: RunOptions()
        ).run()
        #expect(second.report.outbox.pendingBefore == 1, "counted after the account check")
        #expect(second.report.outbox.dropped == ["accountChanged": 1])
        #expect(second.report.outbox.drained == 1)
        #expect(second.report.outbox.pendingAfter == 0)
        #expect(second.report.providers.first { $0.id == "backup" }?.bytesWritten == 1)
        #expect(second.report.providers.first { $0.id == "cloud" }?.bytesWritten == 0)
    }
}

@Suite struct QueuedRunTests {
    @Test(arguments: StateKind.allCases)
    func aRunThatLeavesWritesQueuedSaysSoInEveryJobAndInItsStatus(_ kind: StateKind) async throws {
        let state = try await TestState(kind)
        let directory = try TemporaryDirectory()
        try #"{"version": 1, "pipeline": "x", "source": "store", "count": 2, "items": {"a": "1", "b": "2"}}"#
            .write(toFile: directory.file("items.json"), atomically: true, encoding: .utf8)
        let compiled = try compile(
            accountPipeline("alice", offline: true) + "jobs:\n  - { type: import, path: items.json, to: store }\n",
            in: directory, environment: ["TOKEN": "t"], state: state)
        let outcome = try await PipelineRunner(compiled, options: RunOptions()).run()
        #expect(outcome.report.jobs[0].status == .ok)
        #expect(outcome.report.jobs[0].counts == ["imported": 2, "skipped": 0, "failed": 0, "queued": 2])
        #expect(outcome.report.outbox.pendingAfter == 2)
        #expect(outcome.status == .queued)
    }
}

@Suite struct PlatformWarningTests {
    @Test func aProviderNeverAvailableHereIsAWarningInThePlanNotAnError() throws {
        let directory = try TemporaryDirectory()
        let compiled = try compile(
            """
            version: 1
            name: apple
            providers:
              kv: { type: icloudKV }
              local: { type: memory }
            store:
              providers: [kv, local]

            """, in: directory)
        #expect(
            compiled.spec.warnings.map(\.description) == [
                "p.yaml:4:3: warning: provider `kv` (icloudKV): the iCloud key-value store exists only on Apple platforms "
                    + "and is never available here; it is listed only so its 64 KB tier and key rules apply; it never "
                    + "holds or receives data here"
            ])
        #expect(
            PipelinePlan(compiled).text().contains("\nwarning: provider `kv` (icloudKV): the iCloud key-value store"))
    }

    @Test func aWriteThatFailsIsNotCountedAsBytesWritten() async throws {
        let metrics = ProviderMetrics()
        let provider = MemoryProvider(
            id: "small", capabilities: ProviderCapabilities(maxValueBytes: 4), metrics: metrics)
        _ = try await provider.set([KeyValue("a", "1234"), KeyValue("b", "too large")])
        #expect(metrics.reading.requests == 1)
        #expect(metrics.reading.bytesWritten == 4)
    }
}
