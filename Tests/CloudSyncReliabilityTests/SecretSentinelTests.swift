import CloudSyncEmulator
import CloudSyncTesting
import Foundation
import Testing

/// Plants sentinel secrets — a passphrase, keys, S3, Google and CloudKit credentials, from the environment and from
/// files — runs every command over them against moto and the emulators, and looks for the sentinels in everything
/// the commands printed and every file they left: reports, logs (`--verbose`), errors, exports and state databases.
@Suite(.serialized, .timeLimit(.minutes(10))) struct SecretSentinelTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// A value no output should ever hold, recognisable in a failure.
    private static func sentinel(_ what: String) -> String {
        "\(what)SENTINEL" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
    }

    @Test func noSecretReachesAnyOutputReportLogOrStateFile() async throws {
        let moto = try await MotoS3Server.start(repository: Repository.root, buckets: ["sentinels"])
        let driveSecret = Self.sentinel("DRIVESECRET")
        var oauth = GoogleOAuthEmulator.Configuration()
        let client = GoogleOAuthEmulator.Client(id: "sentinel-client.apps.googleusercontent.com", secret: driveSecret)
        oauth.clients = [client]
        let drive = DriveEmulator(oauth: GoogleOAuthEmulator(configuration: oauth))
        let apiToken = Self.sentinel("CKAPITOKEN")
        var webAuth = CloudKitWebAuthEmulator.Configuration()
        webAuth.apiTokens = [apiToken: nil]
        let cloudKit = CloudKitEmulator(webAuth: CloudKitWebAuthEmulator(configuration: webAuth))
        let emulators = try EmulatorServer(services: [drive, cloudKit])
        defer { emulators.server.stop() }
        let container = "iCloud.com.example.sentinels"
        let webAuthToken = cloudKit.webAuth.issueToken(container: container, environment: "development")
        let refreshToken = drive.oauth.issueTokens(user: "sentinel@example.com", clientID: client.id).refreshToken
        let urls = try #require(emulators.urls["drive"])

        // Secrets given as files live in secrets/ and keys/, which the search skips: they are the inputs.
        let fileManager = FileManager.default
        for folder in ["secrets", "keys"] {
            try fileManager.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true)
        }
        #expect(
            try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/file.key")]).status == 0)
        #expect(
            try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/env.key")]).status == 0)
        let fileKey = try String(contentsOfFile: directory.file("keys/file.key"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let environmentKey = try String(contentsOfFile: directory.file("keys/env.key"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let passphrase = Self.sentinel("PASSPHRASE")
        let s3Secret = Self.sentinel("S3SECRET")
        let s3Token = Self.sentinel("S3TOKEN")
        try s3Secret.write(toFile: directory.file("secrets/s3-secret"), atomically: true, encoding: .utf8)
        try (refreshToken + "\n").write(
            toFile: directory.file("secrets/drive-refresh"), atomically: true, encoding: .utf8)

        let environment = ProcessInfo.processInfo.environment.merging([
            "SENTINEL_PASSPHRASE": passphrase, "SENTINEL_KEY": environmentKey, "SENTINEL_S3_TOKEN": s3Token,
            "SENTINEL_DRIVE_SECRET": driveSecret, "SENTINEL_CK_API": apiToken, "SENTINEL_CK_WEB": webAuthToken,
            "MOTO": moto.endpoint.absoluteString, "DRIVE": urls["endpoint"] ?? "",
            "DRIVE_TOKEN": urls["tokenEndpoint"] ?? "",
            "CLOUDKIT": emulators.baseURL.absoluteString, "HOME": directory.path,
        ]) { $1 }
        let sentinels = [
            "passphrase": passphrase, "key file": fileKey, "key variable": environmentKey, "S3 secret": s3Secret,
            "S3 session token": s3Token, "Drive client secret": driveSecret, "Drive refresh token": refreshToken,
            "CloudKit API token": apiToken, "CloudKit web auth token": webAuthToken,
        ]

        let pipeline = directory.file("sentinels.yaml")
        try """
        version: 1
        name: sentinels
        codecs:
          vault:
            type: xchacha20poly1305
            allowPlaintext: true  # the seed's values are plain text
            keys:
              - { id: current, passphrase: { env: SENTINEL_PASSPHRASE } }
              - { id: filed, file: keys/file.key }
              - { id: env, env: SENTINEL_KEY }
        providers:
          seed: { type: memory, items: { alpha: one, beta: two, gamma: three } }
          local: { type: directory, path: data/local, create: true }
          bucket:
            type: s3
            bucket: sentinels
            endpoint: ${env:MOTO}
            accessKeyId: sentinel-access-key-id
            secretAccessKey: ${file:secrets/s3-secret}
            sessionToken: ${env:SENTINEL_S3_TOKEN}
          drive:
            type: googleDrive
            clientId: sentinel-client.apps.googleusercontent.com
            clientSecret: ${env:SENTINEL_DRIVE_SECRET}
            refreshToken: ${file:secrets/drive-refresh}
            endpoint: ${env:DRIVE}
            tokenEndpoint: ${env:DRIVE_TOKEN}
          cloud:
            type: cloudKit
            container: \(container)
            environment: development
            apiToken: ${env:SENTINEL_CK_API}
            webAuthToken: ${env:SENTINEL_CK_WEB}
            endpoint: ${env:CLOUDKIT}
        store:
          providers: [local, bucket, drive, cloud]
          writeMode: mirror
          codec: vault
        jobs:
          - { type: migrate, from: seed, to: local }
          - { type: sync }
          - { type: verify, provider: bucket }
          - { type: export, from: store, path: out/export.json, codec: vault }
          - { type: export, from: store, path: out/plain.json }
          - { type: rekey, provider: local }
        report:
          path: out/reports/{name}-{startedAt}.json
          latest: out/latest.json
          metrics: out/metrics.prom

        """.write(toFile: pipeline, atomically: true, encoding: .utf8)
        // The same secrets where they do not belong, so every error message gets its chance to print them.
        let broken = directory.file("broken.yaml")
        try """
        version: 1
        name: ${env:SENTINEL_PASSPHRASE}
        codecs:
          vault: { type: '${env:SENTINEL_KEY}', keys: [{ id: '${file:secrets/s3-secret}', env: SENTINEL_CK_API }] }
        providers:
          a: { type: s3, bucket: '${env:SENTINEL_S3_TOKEN}', region: '${env:SENTINEL_DRIVE_SECRET}' }
          b: { type: cloudKit, container: '${env:SENTINEL_CK_WEB}', apiToken: x }
          c: { type: googleDrive, accessToken: x, endpoint: '${file:secrets/drive-refresh}' }
        store: { providers: ['${env:SENTINEL_CK_API}'], writeMode: '${env:SENTINEL_PASSPHRASE}' }

        """.write(toFile: broken, atomically: true, encoding: .utf8)

        var printed: [(command: String, text: String)] = []
        func run(_ arguments: [String], expecting status: Int32? = nil) async throws {
            let result = try await ProcessRunner.run(executable, arguments, environment: environment)
            if let status { #expect(result.status == status, "\(arguments): \(result.standardError)") }
            printed.append((arguments.joined(separator: " "), result.standardOutput + result.standardError))
        }
        try await run(["validate", pipeline], expecting: 0)
        try await run(["validate", "--json", pipeline, broken], expecting: 64)
        try await run(["validate", broken], expecting: 64)
        try await run(["plan", pipeline], expecting: 0)
        try await run(["plan", "--json", pipeline], expecting: 0)
        try await run(["run", "--verbose", pipeline], expecting: 0)
        try await run(["run", "--verbose", "--dry-run", pipeline], expecting: 0)
        try await run(["run", "--verbose", "--report", "-", pipeline], expecting: 0)
        try await run(["history", "--json", pipeline], expecting: 0)
        try await run(["outbox", "list", "--json", pipeline], expecting: 0)
        // A provider that refuses: the CloudKit user signs out, so a run fails against CloudKit.
        cloudKit.webAuth.signOut(appleID: "user@example.com")
        try await run(["run", "--verbose", pipeline])

        #expect(exportedItems(at: directory.file("out/plain.json"))?.count == 3, "the run did not reach every provider")
        var searched = 0
        for (command, text) in printed {
            for (name, secret) in sentinels {
                #expect(!text.contains(secret), "`cloudsync \(command)` printed the \(name)")
            }
        }
        let rawKeys = [fileKey, environmentKey].compactMap { Data(base64Encoded: $0) }
        for path in filesUnder(directory.path)
        where !path.hasPrefix(directory.file("secrets/")) && !path.hasPrefix(directory.file("keys/")) {
            let contents = try Data(contentsOf: URL(fileURLWithPath: path))
            searched += 1
            for (name, secret) in sentinels {
                #expect(contents.range(of: Data(secret.utf8)) == nil, "\(path) holds the \(name)")
            }
            for raw in rawKeys { #expect(contents.range(of: raw) == nil, "\(path) holds a key's bytes") }
        }
        // Reports, the latest copy, metrics, two exports, the state and outbox databases, the directory's files.
        #expect(searched >= 10, "only \(searched) files were searched")
    }
}
