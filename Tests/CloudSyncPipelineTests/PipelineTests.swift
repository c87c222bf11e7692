import CloudSync
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

private func load(_ source: String, environment: [String: String] = [:], directory: String = "/srv/pipelines")
    throws -> PipelineSpec
{
    try PipelineLoader.load(
        source: source, file: "p.yaml", directory: directory, registry: BuiltInProviders.registry,
        environment: environment)
}

private let minimal = """
    version: 1
    name: demo
    providers:
      primary: { type: sqlite, path: data/p.db, create: true }
    store:
      providers: [primary]

    """

@Suite struct PipelineLoaderTests {
    @Test func relativePathsResolveAgainstTheFilesDirectoryNotTheWorkingDirectory() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("conf"), withIntermediateDirectories: true)
        try minimal.write(toFile: directory.file("conf/p.yaml"), atomically: true, encoding: .utf8)
        let previous = FileManager.default.currentDirectoryPath
        defer { FileManager.default.changeCurrentDirectoryPath(previous) }
        FileManager.default.changeCurrentDirectoryPath("/")
        let spec = try PipelineLoader.load(
            path: directory.file("conf/p.yaml"), registry: BuiltInProviders.registry, environment: [:])
        let conf = URL(fileURLWithPath: directory.file("conf")).standardizedFileURL.path
        #expect(spec.providers[0].fields.text("path") == conf + "/data/p.db")
        #expect(spec.state == conf + "/.cloudsync/demo")
    }

    @Test func interpolationWithDefaultsFilesAndEscapes() throws {
        let directory = try TemporaryDirectory()
        try "backups\n".write(toFile: directory.file("where.txt"), atomically: true, encoding: .utf8)
        let spec = try load(
            """
            version: 1
            name: ${env:PIPELINE_NAME:-fallback}
            # ${env:NOT_SET_AND_IN_A_COMMENT} is never looked at
            providers:
              primary: { type: sqlite, path: '${env:DATA_DIR}/p.db' }
              backup: { type: directory, path: '${file:where.txt}/$${literal}' }
            store:
              providers: [primary, backup]
            """, environment: ["DATA_DIR": "/var/lib/cloudsync"], directory: directory.path)
        #expect(spec.name == "fallback")
        #expect(spec.providers[0].written["path"]?.value == "/var/lib/cloudsync/p.db")
        #expect(spec.providers[0].written["path"]?.display == "${env:DATA_DIR}/p.db")
        #expect(spec.providers[1].written["path"]?.value.hasSuffix("/backups/${literal}") == true)
    }

    @Test func interpolatedSecretsNeverReachThePlan() throws {
        let directory = try TemporaryDirectory()
        let spec = try load(
            """
            version: 1
            name: secret-paths
            providers:
              primary: { type: sqlite, path: '${env:SECRET_TOKEN_DIR}/p.db' }
            store:
              providers: [primary]
            """, environment: ["SECRET_TOKEN_DIR": "/hunter2-token"], directory: directory.path)
        let plan = PipelinePlan(try PipelineCompiler.compile(spec, environment: [:]))
        #expect(!plan.text().contains("hunter2"))
        #expect(!plan.json().contains("hunter2"))
        #expect(plan.text().contains("${env:SECRET_TOKEN_DIR}/p.db"))
    }

    @Test func aYAMLBombIsRefusedQuickly() throws {
        var text = minimal + "bomb:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...9 {
            text +=
                "  a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ")
                + "]\n"
        }
        let (error, cpuTime) = measuringThreadCPUTime { #expect(throws: PipelineError.self) { try load(text) } }
        #expect(cpuTime < .seconds(5), "took \(cpuTime) of processor time")
        #expect(error?.diagnostics.first?.message.hasPrefix("the document expands to more than 200000 nodes") == true)
    }

    @Test func aFileOverTheSizeLimitIsRefusedBeforeParsing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("huge.yaml")
        try (minimal + "# " + String(repeating: "x", count: PipelineLoader.maximumFileBytes) + "\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let error = #expect(throws: PipelineError.self) {
            try PipelineLoader.load(path: path, registry: BuiltInProviders.registry, environment: [:])
        }
        #expect(error?.diagnostics.first?.message.hasSuffix("a pipeline file may be at most 4194304 bytes") == true)
    }

    @Test func compilingHasNoSideEffects() async throws {
        let directory = try TemporaryDirectory()
        let spec = try load(minimal, directory: directory.path)
        let compiled = try PipelineCompiler.compile(spec, environment: [:])
        _ = PipelinePlan(compiled).text()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        // Opening providers is the run session's step, and the first that creates anything.
        let session = try await RunSession.open(compiled)
        #expect(FileManager.default.fileExists(atPath: directory.file("data/p.db")))
        await session.close()
    }

    @Test func aKeyFromTheEnvironmentIsDecodedOrRefusedByName() throws {
        let source =
            minimal + "codecs:\n  vault:\n    type: xchacha20poly1305\n    keys: [{ id: k1, env: VAULT_KEY }]\n"
        let spec = try load(source)
        let key = Data(repeating: 7, count: 32).base64EncodedString()
        let compiled = try PipelineCompiler.compile(spec, environment: ["VAULT_KEY": key + "\n"])
        #expect(compiled.codecs["vault"]?.keys.map(\.id) == ["k1"])
        let error = #expect(throws: PipelineError.self) {
            try PipelineCompiler.compile(spec, environment: ["VAULT_KEY": "not a key"])
        }
        #expect(
            error?.diagnostics.first?.message
                == "key `k1` of codec `vault`: environment variable VAULT_KEY is not valid base64; expected one line of "
                + "base64 holding 32 bytes, as `cloudsync keygen` writes")
        #expect(error?.description.contains("not a key") == false)
    }

    @Test func storeOptionsFollowTheFile() throws {
        let spec = try load(
            """
            version: 1
            name: options
            providers:
              phone: { type: icloudKV }
              scratch: { type: memory, maxValueBytes: 1000, items: { a: '1' } }
            store:
              providers: [phone, scratch]
              writeMode: mirror
              tiering: { kvMaxBytes: 32768, recordMaxBytes: 500000 }
              resolver: { type: union, id: id }
              repairOnRead: false
              timeoutMs: 2500
            """)
        let compiled = try PipelineCompiler.compile(spec, environment: [:])
        let options = compiled.storeOptions
        #expect(options.writeMode == .mirror)
        #expect(options.tiering == .thresholds(kvMaxBytes: 32768, recordMaxBytes: 500_000))
        #expect(options.repairOnRead == false)
        #expect(options.timeout == .milliseconds(2500))
        #expect(options.maxValueBytes == ["scratch": 1000])
        let plan = PipelinePlan(compiled)
        #expect(plan.providers.map(\.capBytes) == [32768, 1000])
        #expect(plan.store.keyRules == ["a key may not be empty", "a key may be at most 64 bytes of UTF-8"])
    }
}

/// Every example in `pipelines/` loads, compiles, passes the JSON Schema, and plans to its pinned JSON.
@Suite struct ExamplePipelineTests {
    static let examples =
        (try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot + "/pipelines"))?
        .filter { $0.hasSuffix(".yaml") }.sorted() ?? []

    @Test func thereIsAnExampleForEveryUse() {
        for use in ["scheduled-sync.yaml", "migration-plan.yaml", "encrypted-backup.yaml", "restore-backup.yaml"] {
            #expect(Self.examples.contains(use))
        }
    }

    @Test(arguments: examples)
    func plansToItsPinnedJSON(_ name: String) throws {
        let path = repositoryRoot + "/pipelines/" + name
        let source = try String(contentsOfFile: path, encoding: .utf8)
        #expect(source.hasPrefix("# yaml-language-server: $schema=../schemas/pipeline.schema.json\n"))
        let plan = PipelinePlan(
            try PipelineCompiler.compile(
                try PipelineLoader.load(path: path, registry: BuiltInProviders.registry, environment: [:]),
                environment: [:]),
            // A fixed moment, so a schedule's next slots are the pinned ones.
            now: Date(timeIntervalSince1970: 1_796_378_400))
        let pinned = repositoryRoot + "/Tests/Fixtures/plans/" + name.replacingOccurrences(of: ".yaml", with: ".json")
        if ProcessInfo.processInfo.environment["CLOUDSYNC_UPDATE_EXPECTED"] == "1" {
            try plan.json().write(toFile: pinned, atomically: true, encoding: .utf8)
        }
        #expect(plan.json() == (try String(contentsOfFile: pinned, encoding: .utf8)))
    }
}

@Suite struct SchemaAgreementTests {
    static let python = repositoryRoot + "/.build/pyenv/bin/python3"

    @Test func theArchitecturesLayerDiagramIsPackageSwifts() async throws {
        // scripts/layers.py draws the floors from Package.swift; the document must hold exactly that drawing.
        let check = try await ProcessRunner.run(
            "/usr/bin/env",
            ["python3", repositoryRoot + "/scripts/layers.py", "--check", repositoryRoot + "/docs/ARCHITECTURE.md"])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
    }

    @Test func theErrorCodePageDocumentsEveryCodeWithItsRetryability() throws {
        let page = try String(contentsOfFile: repositoryRoot + "/docs/errors.md", encoding: .utf8)
        for code in ErrorCode.all {
            #expect(page.contains("| `\(code.rawValue)` | \(code.isRetryable ? "yes" : "no") |"), "\(code)")
        }
    }

    @Test func theReferencesProviderTableIsTheRegisteredFields() throws {
        let reference = repositoryRoot + "/docs/pipeline-reference.md"
        let page = try String(contentsOfFile: reference, encoding: .utf8)
        let begin = "<!-- provider-fields:begin (generated from the provider factories; a test checks it) -->\n"
        let end = "<!-- provider-fields:end -->"
        let generated = PipelineReference.providerTable(registry: BuiltInProviders.registry)
        if ProcessInfo.processInfo.environment["CLOUDSYNC_UPDATE_EXPECTED"] == "1",
            let start = page.range(of: begin), let stop = page.range(of: end)
        {
            try (page[..<start.upperBound] + generated + page[stop.lowerBound...]).write(
                toFile: reference, atomically: true, encoding: .utf8)
        }
        #expect(page.contains(begin + generated + end))
    }

    @Test func theReferencesJobTableIsTheRegisteredJobTypes() throws {
        let reference = repositoryRoot + "/docs/pipeline-reference.md"
        let page = try String(contentsOfFile: reference, encoding: .utf8)
        let begin = "<!-- job-types:begin (generated from the registered job types; a test checks it) -->\n"
        let end = "<!-- job-types:end -->"
        let generated = PipelineReference.jobTable(jobTypes: BuiltInJobs.registry)
        if ProcessInfo.processInfo.environment["CLOUDSYNC_UPDATE_EXPECTED"] == "1",
            let start = page.range(of: begin), let stop = page.range(of: end)
        {
            try (page[..<start.upperBound] + generated + page[stop.lowerBound...]).write(
                toFile: reference, atomically: true, encoding: .utf8)
        }
        #expect(page.contains(begin + generated + end))
    }

    @Test func theSchemaFileIsTheOneTheBinaryPrints() throws {
        let file = try String(contentsOfFile: repositoryRoot + "/schemas/pipeline.schema.json", encoding: .utf8)
        #expect(file == PipelineSchema.json(registry: BuiltInProviders.registry) + "\n")
        let report = try String(contentsOfFile: repositoryRoot + "/schemas/report.schema.json", encoding: .utf8)
        #expect(report == ReportSchema.json() + "\n")
        #expect(try JSONSerialization.jsonObject(with: Data(file.utf8)) is [String: Any])
    }

    /// Rules only the loader can check: references between sections, the environment, files on disk, uniqueness
    /// of names inside lists.
    static let loaderOnly: Set<String> = [
        "22-store-unknown-provider.yaml", "32-unknown-store-codec.yaml", "33-unknown-provider-codec.yaml",
        "38-codec-key-duplicate-id.yaml", "39-codec-key-file-missing.yaml", "45-migrate-unknown-provider.yaml",
        "46-migrate-same-provider.yaml", "51-duplicate-job-names.yaml", "56-missing-env-variable.yaml",
        "57-unknown-interpolation.yaml", "63-unclosed-class-in-keys.yaml", "67-state-postgresql-password-in-file.yaml",
        "71-sync-shards-incremental.yaml", "72-outbox-autoflush-too-often.yaml",
        "74-schedule-jitter-past-the-next-slot.yaml", "75-max-bytes-below-an-empty-database-of-its-page-size.yaml",
        "76-name-dot-dot.yaml", "77-account-on-a-provider-that-signs-in-to-none.yaml",
        // What a schema cannot say: how a rename's captures line up, and whether a text is a jq program.
        "78-rename-drops-a-capture.yaml", "79-transform-is-not-jq.yaml", "80-rename-captures-side-by-side.yaml",
    ]

    /// The loader reads `${env:…}` and `${file:…}` in any field, typed ones included (an environment, a count, a
    /// flag); the schema takes them there too, so an editor does not flag a file that loads.
    @Test func referencesInTypedFieldsPassTheSchemaAndOtherTextDoesNot() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the tests' Python environment is missing: run `make test`, which creates it")
            return
        }
        let directory = try TemporaryDirectory(prefix: "schema-references")
        let head = "version: 1\nname: p\nstore: { providers: [ck] }\nproviders:\n"
        let referenced = directory.file("referenced.yaml")
        try
            (head
            + "  ck: { type: cloudKit, container: iCloud.x, apiToken: '${env:T}', environment: '${env:CK_ENV}', "
            + "timeoutMs: '${env:MS}' }\n  db: { type: sqlite, path: a.db, create: '${file:create.txt}' }\n"
            + "jobs:\n  - { type: sync, incremental: '${env:INC}', shards: '${env:SHARDS}' }\n").write(
                toFile: referenced, atomically: true, encoding: .utf8)
        let plain = directory.file("plain.yaml")
        try (head + "  ck: { type: cloudKit, container: iCloud.x, apiToken: t, environment: staging }\n").write(
            toFile: plain, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(
            Self.python,
            [
                repositoryRoot + "/scripts/check_schema.py", repositoryRoot + "/schemas/pipeline.schema.json",
                referenced, plain,
            ])
        #expect(result.standardOutput.contains("PASS \(referenced)"), "\(result.standardOutput)")
        #expect(result.standardOutput.contains("FAIL \(plain)"), "\(result.standardOutput)")
    }

    @Test func examplesPassTheSchemaAndInvalidFilesFailItWhereASchemaCanSaySo() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            Issue.record("the tests' Python environment is missing: run `make test`, which creates it")
            return
        }
        let examples = ExamplePipelineTests.examples.map { repositoryRoot + "/pipelines/" + $0 }
        let invalid = InvalidPipelineTests.files.map { invalidDirectory + "/" + $0 }
        let result = try await ProcessRunner.run(
            Self.python,
            [repositoryRoot + "/scripts/check_schema.py", repositoryRoot + "/schemas/pipeline.schema.json"] + examples
                + invalid)
        #expect(result.status == 0, "\(result.standardError)")
        var verdicts: [String: Bool] = [:]
        for line in result.standardOutput.split(separator: "\n") {
            let passed = line.hasPrefix("PASS ")
            let path = String(line.dropFirst(5).prefix { $0 != ":" })
            verdicts[(path as NSString).lastPathComponent] = passed
        }
        for example in ExamplePipelineTests.examples {
            #expect(verdicts[example] == true, "\(example) fails the schema")
        }
        for file in InvalidPipelineTests.files {
            #expect(
                verdicts[file] == Self.loaderOnly.contains(file),
                "\(file): schema verdict \(String(describing: verdicts[file]))")
        }
    }
}
