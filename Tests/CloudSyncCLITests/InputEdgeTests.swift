import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

/// Smaller inputs a hostile tester tried: empty and NUL paths, a state directory at `/`, a quoted version, an empty
/// passphrase, a state directory or report under a file, and `keygen` into a missing directory.
@Suite struct InputEdgeTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// The loader's messages for `body` after `version: 1`, `name: p`.
    private func messages(_ body: String, version: String = "1", environment: [String: String] = [:]) -> [String] {
        do {
            let spec = try PipelineLoader.load(
                source: "version: \(version)\nname: p\n" + body, file: "p.yaml", directory: directory.path,
                registry: BuiltInProviders.registry, environment: environment)
            _ = try PipelineCompiler.compile(spec, environment: environment)
            return []
        } catch {
            return error.diagnostics.map { "\($0.mark.line):\($0.mark.column): \($0.message)" }
        }
    }

    private let memory = "providers: { a: { type: memory } }\nstore: { providers: [a] }\n"

    @Test func emptyPathsAreRefusedWhereverAPathIsWritten() {
        #expect(
            messages(
                "state: ''\n" + memory + "jobs:\n  - { type: export, from: store, path: '' }\n"
                    + "  - { type: import, to: store, path: '' }\nreport: { path: '', latest: '', metrics: '' }\n")
                == [
                    "3:8: `state` must not be empty; leave it out for the default, .cloudsync/<name> beside the file",
                    "7:40: `path` in job 1 (export) must not be empty",
                    "8:38: `path` in job 2 (import) must not be empty",
                    "9:17: `path` in report must not be empty",
                    "9:29: `latest` in report must not be empty",
                    "9:42: `metrics` in report must not be empty",
                ])
    }

    @Test func theStateDirectoryMayNotBeTheRoot() {
        #expect(
            messages("state: /\n" + memory) == [
                "3:8: `state` must not be the root directory /; name a directory of its own, such as /var/lib/cloudsync/p"
            ])
        #expect(messages("state: /tmp/../\n" + memory).count == 1)
    }

    @Test func aPathHoldingANULIsRefused() {
        #expect(
            messages(
                "providers: { a: { type: sqlite, path: \"a\\0b.db\", create: true } }\nstore: { providers: [a] }\n")
                == ["3:39: `path` in provider `a` must not contain a NUL character"])
        #expect(
            messages(memory + "report: { path: \"r\\0.json\" }\n") == [
                "5:17: `path` in report must not contain a NUL character"
            ])
    }

    @Test func aQuotedVersionIsText() {
        #expect(
            messages(memory, version: "'1'") == [
                "1:10: `version` must be the number 1, not the text \"1\"; write version: 1 without quotes"
            ])
    }

    @Test func anEmptyPassphraseVariableIsReportedAsEmpty() {
        let codec =
            "providers: { a: { type: memory } }\n"
            + "codecs: { v: { type: xchacha20poly1305, keys: [{ id: k, passphrase: { env: PP } }] } }\n"
            + "store: { providers: [a], codec: v }\n"
        #expect(
            messages(codec, environment: ["PP": ""]) == [
                "4:48: key `k` of codec `v`: environment variable PP is empty; it should hold the passphrase"
            ])
        #expect(
            messages(codec) == [
                "4:48: key `k` of codec `v`: environment variable PP is not set; it should hold the passphrase"
            ])
    }

    @Test func aStateDirectoryUnderAFileIsExplainedWithoutAFoundationDump() async throws {
        #expect(FileManager.default.createFile(atPath: directory.file("afile"), contents: Data()))
        let path = directory.file("p.yaml")
        try ("version: 1\nname: p\nstate: afile/state\n" + memory + "jobs: [{ type: sync }]\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(executable, ["run", path])
        #expect(result.status == 2)
        #expect(!result.standardError.contains("NSCocoaErrorDomain"), "\(result.standardError)")
        #expect(!result.standardError.contains("operation could not be completed"), "\(result.standardError)")
        #expect(
            result.standardError.contains(
                "cannot use the state directory \(directory.file("afile/state")): \(directory.file("afile")) is a file, not a directory"
            ), "\(result.standardError)")
    }

    @Test func keygenIntoAMissingDirectorySaysSo() async throws {
        let result = try await ProcessRunner.run(
            executable, ["keygen", "--out", "missing/dir/k.key"], currentDirectory: directory.path)
        #expect(result.status == 73)
        #expect(
            result.standardError
                == "Error: cannot create missing/dir/k.key: the directory missing/dir does not exist; create it "
                + "first (mkdir -p missing/dir) or give --out a path in an existing directory\n")
    }

    /// Foundation's `deletingLastPathComponent` crashed (SIGILL, status 132) on a one-character relative path.
    @Test(arguments: ["k/", "k/k.key"])
    func keygenIntoAOneLetterMissingDirectorySaysSo(_ path: String) async throws {
        let result = try await ProcessRunner.run(
            executable, ["keygen", "--out", path], currentDirectory: directory.path)
        #expect(result.status == 73, "\(result.standardError)")
        #expect(result.standardError.hasPrefix("Error: cannot create "), "\(result.standardError)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aRunWhoseReportCannotBeWrittenKeepsItsJobsStatusAndPrintsTheReport() async throws {
        #expect(FileManager.default.createFile(atPath: directory.file("afile"), contents: Data()))
        let path = directory.file("p.yaml")
        try
            ("version: 1\nname: p\nstate: state\n" + memory + "jobs: [{ type: sync }]\n"
            + "report: { path: afile/r.json }\n").write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(executable, ["run", path])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(
            result.standardError.contains(
                "Error: the run finished (ok) but the report could not be written to \(directory.file("afile/r.json")): "
                    + "\(directory.file("afile")) is a file, not a directory"), "\(result.standardError)")
        #expect(result.standardError.contains("the report follows on standard output"))
        let report = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        #expect(report?["status"] as? String == "ok")
    }
}
