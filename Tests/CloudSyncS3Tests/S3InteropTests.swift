import CloudSync
import CloudSyncLocal
import CloudSyncS3
import CloudSyncTesting
import Foundation
import Testing

/// rclone (Debian's package) as an independent S3 client against the same moto server, and the `cloudsync`
/// executable running pipelines on the `s3` provider.
@Suite(.timeLimit(.minutes(10))) struct S3InteropTests {
    static let rclone = "/usr/bin/rclone"

    /// Runs rclone with a remote `moto:` pointing at the shared server.
    func rclone(_ arguments: [String]) async throws -> ProcessResult {
        guard FileManager.default.isExecutableFile(atPath: Self.rclone) else {
            throw MissingPeer(description: "rclone is missing: `make test` installs it (apt-get install rclone)")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["AWS_CA_BUNDLE"] = nil
        environment.merge([
            "RCLONE_CONFIG_MOTO_TYPE": "s3", "RCLONE_CONFIG_MOTO_PROVIDER": "Other",
            "RCLONE_CONFIG_MOTO_ENDPOINT": try await SharedMoto.endpoint().absoluteString,
            "RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE": "true", "RCLONE_CONFIG_MOTO_ACCESS_KEY_ID": "rclone",
            "RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY": "rclone", "RCLONE_CONFIG_MOTO_REGION": "us-east-1",
            "RCLONE_CONFIG": "/dev/null",
        ]) { $1 }
        let result = try await ProcessRunner.run(Self.rclone, arguments, environment: environment)
        #expect(result.status == 0, "rclone \(arguments): \(result.standardError)")
        return result
    }

    /// Runs `cloudsync` with moto's endpoint and dummy keys in the environment.
    func cloudsync(_ arguments: [String], directory: String) async throws -> ProcessResult {
        var environment = ProcessInfo.processInfo.environment
        environment.merge([
            "CLOUDSYNC_S3_ENDPOINT": try await SharedMoto.endpoint().absoluteString, "AWS_ACCESS_KEY_ID": "AKIACLI",
            "AWS_SECRET_ACCESS_KEY": "cli-secret-value", "CLOUDSYNC_S3_BUCKET": "cloudsync-rclone",
        ]) { $1 }
        return try await ProcessRunner.run(
            try ProcessRunner.builtProduct("cloudsync"), arguments, environment: environment,
            currentDirectory: directory)
    }

    static let keys = ["settings.theme", "with space", "plus+sign", "ünïcode/日本", "nested/deeper/key", "100%"]

    @Test func rcloneReadsBackWhatCloudSyncWritesByteForByte() async throws {
        let provider = makeProvider(
            endpoint: try await SharedMoto.endpoint(), bucket: "cloudsync-rclone", prefix: "from-cloudsync/")
        let items = Self.keys.enumerated().map { KeyValue($1, "{\"n\":\($0),\"text\":\"héllo 🌍\\n\"}\n") }
        _ = try await provider.set(items)
        let listed = try await rclone(["lsf", "-R", "--files-only", "moto:cloudsync-rclone/from-cloudsync"])
        #expect(Set(listed.standardOutput.split(separator: "\n").map(String.init)) == Set(Self.keys))
        for item in items {
            let cat = try await rclone(["cat", "moto:cloudsync-rclone/from-cloudsync/" + item.key])
            #expect(cat.standardOutput == item.value, "\(item.key)")
        }
    }

    @Test func cloudSyncMigrateReadsBackWhatRcloneUploads() async throws {
        let directory = try TemporaryDirectory()
        let upload = directory.file("upload")
        var expected: [String: String] = [:]
        for (index, key) in Self.keys.enumerated() {
            let path = upload + "/" + key
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let value = "value \(index): \(key) ✓"
            try value.write(toFile: path, atomically: true, encoding: .utf8)
            expected[key] = value
        }
        _ = try await rclone(["copy", upload, "moto:cloudsync-rclone/from-rclone"])
        try """
        version: 1
        name: from-rclone
        providers:
          bucket: { type: s3, bucket: cloudsync-rclone, prefix: from-rclone/, endpoint: "${env:CLOUDSYNC_S3_ENDPOINT}" }
          local: { type: directory, path: local, create: true }
        store: { providers: [local, bucket] }
        jobs:
          - { type: migrate, from: bucket, to: local }
        """.write(toFile: directory.file("pipeline.yaml"), atomically: true, encoding: .utf8)
        let run = try await cloudsync(["run", "pipeline.yaml", "--quiet"], directory: directory.path)
        #expect(run.status == 0, "\(run.standardOutput)\(run.standardError)")
        let local = try DirectoryProvider(root: directory.file("local"))
        let read = try await local.get(Self.keys).map { try $0.get() }
        #expect(read == Self.keys.map { expected[$0] })
    }

    @Test func aMirrorToABucketReadsOnlyWhatItsSnapshotCannotVouchForAndUndoesAnEditBehindItsBack() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("local"), withIntermediateDirectories: true)
        let local = try DirectoryProvider(root: directory.file("local"))
        let keys = (0..<5).map { "prefs.key\($0)" }
        _ = try await local.set(keys.map { KeyValue($0, "value of \($0)") })
        // Requests go through a proxy whose log says which objects were read and written.
        let proxy = try ForwardingProxy(upstream: try await SharedMoto.endpoint())
        defer { proxy.server.stop() }
        try """
        version: 1
        name: mirror-bucket
        providers:
          local: { type: directory, path: local }
          bucket: { type: s3, bucket: cloudsync-rclone, prefix: mirrored/, endpoint: "\(proxy.endpoint.absoluteString)" }
        store: { providers: [local] }
        jobs:
          - { type: mirror, from: local, to: bucket }
        """.write(toFile: directory.file("pipeline.yaml"), atomically: true, encoding: .utf8)

        func run() async throws -> (counts: [String: Int], reads: Int, writes: Int) {
            proxy.server.clearLog()
            let result = try await cloudsync(["run", "pipeline.yaml", "--report", "-"], directory: directory.path)
            #expect(result.status == 0, "\(result.standardError)")
            let report = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
            let job = (report?["jobs"] as? [[String: Any]])?.first
            let objects = proxy.server.requestLog.filter { $0.path.contains("/mirrored/") }
            return (
                job?["counts"] as? [String: Int] ?? [:], objects.filter { $0.method == "GET" }.count,
                objects.filter { $0.method == "PUT" }.count
            )
        }

        let first = try await run()
        #expect(first.counts["copied"] == 5 && first.writes == 5, "\(first)")
        // The snapshot keeps the ETag each PutObject answered, which the listing gives the object too: from then on
        // the ETags vouch for the bucket, and no object is read or written.
        for _ in 0..<2 {
            let again = try await run()
            #expect(again.counts["unchanged"] == 5 && again.reads == 0 && again.writes == 0, "\(again)")
        }

        // Someone else rewrites one object (rclone, as an outside client): its ETag changes, so that one is read,
        // found to differ, and put back.
        let edited = directory.file("edited")
        try "changed behind the mirror's back".write(toFile: edited, atomically: true, encoding: .utf8)
        _ = try await rclone(["copyto", edited, "moto:cloudsync-rclone/mirrored/prefs.key2"])
        let fourth = try await run()
        #expect(fourth.counts["updated"] == 1 && fourth.counts["unchanged"] == 4, "\(fourth)")
        #expect(fourth.reads == 1 && fourth.writes == 1, "\(fourth)")
        let restored = try await rclone(["cat", "moto:cloudsync-rclone/mirrored/prefs.key2"]).standardOutput
        #expect(restored == "value of prefs.key2")
    }

    /// Random histories on both sides between mirror runs (edits, rewrites with the same value, removals, and writes
    /// behind the mirror's back at the destination), checked against the one thing a mirror promises: afterwards
    /// the destination holds exactly the source's keys and values.
    @Test(arguments: [7, 19]) func afterEveryMirrorRunTheDestinationIsTheSource(seed: Int) async throws {
        let directory = try TemporaryDirectory()
        let endpoint = try await SharedMoto.endpoint()
        let source = makeProvider(endpoint: endpoint, bucket: "cloudsync-rclone", prefix: "model-\(seed)/from/")
        let destination = makeProvider(endpoint: endpoint, bucket: "cloudsync-rclone", prefix: "model-\(seed)/to/")
        try """
        version: 1
        name: mirror-model
        providers:
          from: { type: s3, bucket: cloudsync-rclone, prefix: model-\(seed)/from/, endpoint: "${env:CLOUDSYNC_S3_ENDPOINT}" }
          to: { type: s3, bucket: cloudsync-rclone, prefix: model-\(seed)/to/, endpoint: "${env:CLOUDSYNC_S3_ENDPOINT}" }
        store: { providers: [from] }
        jobs:
          - { type: mirror, from: from, to: to, maxDeletes: 100% }
        """.write(toFile: directory.file("pipeline.yaml"), atomically: true, encoding: .utf8)
        var random = SeededRandom(seed: UInt64(seed))
        let keys = (0..<12).map { "k\($0)" }
        for round in 0..<6 {
            for key in keys {
                switch Int.random(in: 0..<8, using: &random) {
                case 0: _ = try await source.set([KeyValue(key, "v\(round)-\(key)")])
                case 1: _ = try await source.remove([key])
                case 2:
                    // The same value written again: a new ETag only where the bytes differ.
                    if let value = try await source.get([key]).first.flatMap({ try $0.get() }) {
                        _ = try await source.set([KeyValue(key, value)])
                    }
                case 3: _ = try await destination.set([KeyValue(key, "behind its back \(round)")])
                case 4: _ = try await destination.remove([key])
                default: break
                }
            }
            let run = try await cloudsync(["run", "pipeline.yaml", "--quiet"], directory: directory.path)
            #expect(run.status == 0, "round \(round): \(run.standardError)")
            let held = try await listEveryKey(of: source)
            #expect(try await listEveryKey(of: destination) == held, "round \(round)")
            let expected = try await source.get(held).map { try $0.get() }
            #expect(try await destination.get(held).map { try $0.get() } == expected, "round \(round)")
        }
    }

    @Test func encryptedValuesInTheBucketAreTheDocumentedEnvelope() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("source"), withIntermediateDirectories: true)
        try "the secret setting".write(
            toFile: directory.file("source/settings.theme"), atomically: true, encoding: .utf8)
        let keyFile = Repository.root + "/pipelines/keys/demo-backup.key"
        try """
        version: 1
        name: encrypted-to-s3
        providers:
          source: { type: directory, path: source }
          bucket: { type: s3, bucket: cloudsync-rclone, prefix: encrypted/, endpoint: "${env:CLOUDSYNC_S3_ENDPOINT}", codec: vault }
        codecs:
          vault: { type: xchacha20poly1305, keys: [{ id: demo2026, file: \(keyFile) }] }
        store: { providers: [source, bucket] }
        jobs:
          - { type: migrate, from: source, to: bucket }
        """.write(toFile: directory.file("pipeline.yaml"), atomically: true, encoding: .utf8)
        let run = try await cloudsync(["run", "pipeline.yaml", "--quiet"], directory: directory.path)
        #expect(run.status == 0, "\(run.standardOutput)\(run.standardError)")
        let envelope = try await rclone(["cat", "moto:cloudsync-rclone/encrypted/settings.theme"]).standardOutput
        #expect(!envelope.contains("secret setting"))
        let decrypted = try await ProcessRunner.run(
            Repository.python,
            [
                Repository.root + "/scripts/envelope_interop.py", "decrypt", envelope, "settings.theme", "--key-file",
                keyFile,
            ])
        #expect(decrypted.status == 0, "\(decrypted.standardError)")
        #expect(decrypted.standardOutput == "the secret setting")
    }

    @Test func theExamplePipelineValidatesAndItsPlanNamesTheCredentialSourceNotTheSecret() async throws {
        let pipelines = Repository.root + "/pipelines"
        let validate = try await cloudsync(["validate", "s3-backup.yaml"], directory: pipelines)
        #expect(validate.status == 0, "\(validate.standardOutput)\(validate.standardError)")
        let plan = try await cloudsync(["plan", "s3-backup.yaml", "--json"], directory: pipelines)
        #expect(plan.status == 0, "\(plan.standardError)")
        #expect(plan.standardOutput.contains("access key AKIACLI from the environment"))
        #expect(plan.standardOutput.contains("/cloudsync-rclone/settings/ (path style, signed for us-east-1)"))
        #expect(!plan.standardOutput.contains("cli-secret-value"))
    }
}
