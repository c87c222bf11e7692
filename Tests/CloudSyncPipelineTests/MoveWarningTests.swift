import CloudSyncPipeline
import CloudSyncRunner
import Testing

/// A move removes what it copied from its source; from a provider that takes no conditional removals (Drive) another
/// writer's value stored there between the check and the removal goes too, which the pipeline says when it loads.
@Suite struct MoveWarningTests {
    static func load(_ jobs: String) throws -> PipelineSpec {
        try PipelineLoader.load(
            source: """
                version: 1
                name: p
                providers:
                  drive: { type: googleDrive, clientId: c, clientSecret: '${env:SECRET}', refreshToken: '${env:TOKEN}' }
                  local: { type: directory, path: data/local }
                store: { providers: [local] }
                jobs:
                \(jobs)

                """, file: "p.yaml", directory: "/tmp", registry: BuiltInProviders.registry,
            environment: ["SECRET": "s", "TOKEN": "1//t"])
    }

    @Test func aMoveFromDriveIsWarnedAboutAtTheJob() throws {
        let spec = try Self.load("  - { type: move, name: out-of-drive, from: drive, to: local }")
        #expect(spec.warnings.count == 1)
        let warning = try #require(spec.warnings.first)
        #expect(warning.isWarning && warning.mark.line == 8)
        #expect(
            warning.description.hasPrefix(
                "p.yaml:8:5: warning: job `out-of-drive` (move): provider `drive` takes no conditional removals"))
    }

    @Test func aMoveFromAProviderThatTakesConditionsIsNot() throws {
        let spec = try Self.load("  - { type: move, name: into-drive, from: local, to: drive }")
        #expect(spec.warnings.isEmpty, "\(spec.warnings.map(\.message))")
    }
}
