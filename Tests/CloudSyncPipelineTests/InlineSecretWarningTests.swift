import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

/// A secret written in the pipeline file itself is worth a warning that names the field and says how to give it
/// instead; the file still loads, and no output quotes the secret.
@Suite struct InlineSecretWarningTests {
    static let secret = "INLINESENTINEL-9vK3qZ"

    static func load(_ yaml: String, environment: [String: String] = [:]) throws -> PipelineSpec {
        try PipelineLoader.load(
            source: yaml, file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry,
            environment: environment)
    }

    @Test func aSecretWrittenInlineIsWarnedAboutAtItsField() throws {
        let spec = try Self.load(
            """
            version: 1
            name: p
            providers:
              bucket:
                type: s3
                bucket: backups
                accessKeyId: AKIAEXAMPLE
                secretAccessKey: \(Self.secret)
            store: { providers: [bucket] }

            """)
        let warnings = spec.warnings.filter { $0.message.contains("secret written in the file") }
        #expect(warnings.count == 1)
        let warning = try #require(warnings.first)
        #expect(warning.isWarning)
        #expect(warning.mark.line == 8 && warning.mark.column == 22)
        #expect(warning.message.contains("`secretAccessKey`"))
        #expect(warning.message.contains("${env:NAME} or ${file:path}"))
        let rendered = warning.rendered(source: spec.source)
        #expect(rendered.hasPrefix("p.yaml:8:22: warning: provider `bucket` (s3): `secretAccessKey` is a secret"))
        #expect(!rendered.contains(Self.secret), "the warning quotes the secret:\n\(rendered)")
        #expect(rendered.contains(String(repeating: "*", count: Self.secret.count)))
        // The access key id is no secret: one warning only.
        #expect(!spec.warnings.contains { $0.message.contains("`accessKeyId`") })
    }

    @Test func aSecretFromTheEnvironmentOrAFileIsNotWarnedAbout() throws {
        let spec = try Self.load(
            """
            version: 1
            name: p
            providers:
              drive: { type: googleDrive, clientId: c, clientSecret: '${env:SECRET}', refreshToken: '${env:TOKEN}' }
            store: { providers: [drive] }

            """, environment: ["SECRET": Self.secret, "TOKEN": "1//token"])
        #expect(spec.warnings.isEmpty, "\(spec.warnings.map(\.message))")
    }

    @Test func validateSaysValidWithTheWarningAndNeverPrintsTheSecret() async throws {
        let directory = try TemporaryDirectory(prefix: "inline-secret")
        let file = directory.file("p.yaml")
        try """
        version: 1
        name: p
        providers:
          ck: { type: cloudKit, container: iCloud.com.example, apiToken: \(Self.secret) }
        store: { providers: [ck] }

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let executable = try ProcessRunner.builtProduct("cloudsync")
        for arguments in [["validate", file], ["validate", "--json", file], ["plan", file]] {
            let result = try await ProcessRunner.run(executable, arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
            #expect(!(result.standardOutput + result.standardError).contains(Self.secret), "\(arguments)")
            #expect((result.standardOutput + result.standardError).contains("`apiToken` is a secret"), "\(arguments)")
        }
    }
}
