import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path
let invalidDirectory = repositoryRoot + "/Tests/Fixtures/invalid-pipelines"

/// The invalid corpus: every file fails the loader with exactly the text in its `.expected` twin.
///
/// Set CLOUDSYNC_UPDATE_EXPECTED=1 to rewrite the twins after a deliberate change of wording (then review the diff).
@Suite struct InvalidPipelineTests {
    static let files =
        (try? FileManager.default.contentsOfDirectory(atPath: invalidDirectory))?
        .filter { $0.hasSuffix(".yaml") }.sorted() ?? []

    @Test func theCorpusHoldsAtLeastFortyFiles() {
        #expect(Self.files.count >= 40)
    }

    @Test(arguments: files)
    func failsWithItsExpectedText(_ name: String) throws {
        let source = try String(contentsOfFile: invalidDirectory + "/" + name, encoding: .utf8)
        var rendered = "loaded without error"
        do {
            let spec = try PipelineLoader.load(
                source: source, file: name, directory: invalidDirectory, registry: BuiltInProviders.registry,
                environment: ["VAULT_KEY": "not base64!"])
            _ = try PipelineCompiler.compile(spec, environment: [:])
        } catch {
            rendered = error.description
        }
        let expectedPath = invalidDirectory + "/" + name.replacingOccurrences(of: ".yaml", with: ".expected")
        if ProcessInfo.processInfo.environment["CLOUDSYNC_UPDATE_EXPECTED"] == "1" {
            try (rendered + "\n").write(toFile: expectedPath, atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOfFile: expectedPath, encoding: .utf8)
        #expect(rendered + "\n" == expected)
    }
}
