import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

/// A value that came from `${env:…}` or `${file:…}` is never printed in a validation error; the error names the
/// reference it came from instead.
@Suite struct InterpolatedSecretTests {
    /// Invalid for every field below: not an identifier, not a number, a URL, a region or a bucket, and it ends in
    /// a lone backslash (a bad glob).
    static let sentinel = "PASSSENTINEL-7fQ2/x+=\\"
    /// What a key file holds: one line of base64.
    static let base64Key = "S0VZU0VOVElORUwtQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="

    /// Each pipeline sets one field (or a few) from the sentinel variable `S` or the file `secret.txt`.
    static let pipelines: [(name: String, yaml: String)] = [
        ("version", "version: ${env:S}\nname: p\nproviders: { a: { type: memory } }\nstore: { providers: [a] }\n"),
        ("name", "version: 1\nname: ${env:S}\nproviders: { a: { type: memory } }\nstore: { providers: [a] }\n"),
        ("provider type", "version: 1\nname: p\nproviders: { a: { type: '${env:S}' } }\nstore: { providers: [a] }\n"),
        (
            "provider fields",
            """
            version: 1
            name: p
            providers:
              a: { type: sqlite, path: a.db, create: '${env:S}', maxBytes: '${env:S}' }
              b: { type: s3, bucket: '${env:S}', region: '${env:S}' }
              c: { type: s3, bucket: b, endpoint: '${env:S}' }
              d: { type: cloudKit, container: iCloud.x, apiToken: t, environment: '${env:S}', zone: '${env:S}' }
              e: { type: googleDrive, accessToken: t, endpoint: '${file:secret.txt}' }
              f: { type: memory, maxValueBytes: '${env:S}', codec: '${env:S}' }
            store: { providers: [a] }

            """
        ),
        (
            "codecs",
            """
            version: 1
            name: p
            providers: { a: { type: memory } }
            codecs:
              v: { type: '${env:S}', allowPlaintext: '${env:S}', keys: [{ id: '${file:secret.txt}', env: K }] }
            store: { providers: [a] }

            """
        ),
        (
            "store",
            """
            version: 1
            name: p
            providers: { a: { type: memory } }
            store:
              providers: ['${env:S}', '${file:secret.txt}']
              writeMode: '${env:S}'
              timeoutMs: '${env:S}'
              codec: '${env:S}'
              repairOnRead: '${file:secret.txt}'
              resolver: { type: '${env:S}' }
              tiering: { kvMaxBytes: '${env:S}' }
              outbox: { maxEntries: '${env:S}', enabled: '${env:S}' }

            """
        ),
        (
            "jobs and report",
            """
            version: 1
            name: p
            providers: { a: { type: memory }, b: { type: memory } }
            store: { providers: [a] }
            jobs:
              - { type: sync, name: '${env:S}', providers: ['${env:S}'] }
              - { type: sync, name: '${env:S}' }
              - { type: migrate, from: '${env:S}', to: b, keys: '${env:S}', overwrite: '${env:S}' }
              - { type: quota, warnAbove: '${env:S}', failOnWarning: '${env:S}' }
              - { type: export, from: '${env:S}', path: x.json, codec: '${file:secret.txt}' }
              - { type: clear, provider: '${env:S}' }
            report: { keep: '${env:S}' }

            """
        ),
    ]

    @Test(arguments: pipelines.map(\.name))
    func validationErrorsNameTheReferenceNotItsValue(_ name: String) throws {
        let directory = try TemporaryDirectory()
        try "\(Self.base64Key)\n".write(toFile: directory.path + "/secret.txt", atomically: true, encoding: .utf8)
        let yaml = try #require(Self.pipelines.first { $0.name == name }).yaml
        var rendered = ""
        do {
            let spec = try PipelineLoader.load(
                source: yaml, file: "p.yaml", directory: directory.path, registry: BuiltInProviders.registry,
                environment: ["S": Self.sentinel, "K": Self.base64Key])
            _ = try PipelineCompiler.compile(spec, environment: ["K": Self.base64Key])
            Issue.record("the pipeline loaded")
        } catch {
            rendered = error.description
        }
        #expect(!rendered.isEmpty)
        #expect(!rendered.contains("PASSSENTINEL"), "\(rendered)")
        #expect(!rendered.contains(Self.base64Key), "\(rendered)")
        #expect(!rendered.contains("S0VZU0VOVElORU"), "\(rendered)")
        // Each error about an interpolated value says where it came from.
        #expect(rendered.contains("${env:S}") || rendered.contains("${file:secret.txt}"))
    }

    @Test func theMessageSaysWhereTheValueCameFrom() throws {
        let yaml =
            "version: 1\nname: p\nproviders: { a: { type: memory } }\nstore: { providers: [a], writeMode: '${env:S}' }\n"
        do {
            _ = try PipelineLoader.load(
                source: yaml, file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry,
                environment: ["S": Self.sentinel])
            Issue.record("the pipeline loaded")
        } catch {
            #expect(
                error.diagnostics.map(\.message) == [
                    "`writeMode` in store must be one of failover, mirror; found the value of ${env:S} (not shown)"
                ])
        }
    }

    @Test func aValueWrittenInTheFileIsStillQuoted() throws {
        let yaml =
            "version: 1\nname: p\nproviders: { a: { type: memory } }\nstore: { providers: [a], writeMode: mirorr }\n"
        do {
            _ = try PipelineLoader.load(
                source: yaml, file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry)
            Issue.record("the pipeline loaded")
        } catch {
            #expect(
                error.diagnostics.map(\.message) == [
                    "`writeMode` in store must be one of failover, mirror; found \"mirorr\"; did you mean mirror?"
                ])
        }
    }

    /// `plan` showed the pipeline's name expanded from the environment while it shows every other value as written.
    @Test func planShowsANameFromTheEnvironmentAsWritten() throws {
        let environment = ["PIPELINE": "nightly-backup"]
        let spec = try PipelineLoader.load(
            source:
                "version: 1\nname: ${env:PIPELINE}\nproviders: { a: { type: memory } }\nstore: { providers: [a] }\n",
            file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry, environment: environment)
        #expect(spec.name == "nightly-backup")
        let plan = PipelinePlan(try PipelineCompiler.compile(spec, environment: environment))
        #expect(plan.text().hasPrefix("pipeline ${env:PIPELINE} (version 1)"), "\(plan.text())")
        #expect(!plan.text().contains("pipeline nightly-backup"))
        #expect(plan.json().contains("\"name\" : \"${env:PIPELINE}\""), "\(plan.json())")
    }
}
