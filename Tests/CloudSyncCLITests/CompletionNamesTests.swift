import CloudSyncTesting
import Foundation
import Testing

/// Completing an option's value from the pipeline file on the line (job names for --job, provider ids for
/// --provider), in bash and fish as a person's shell runs the scripts `cloudsync completions` prints.
@Suite struct CompletionNamesTests {
    let executable: String
    let directory: TemporaryDirectory
    let pipeline: String

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory(prefix: "completion-names")
        pipeline = directory.file("nightly.yaml")
        try """
        version: 1
        name: nightly
        providers:
          primary: { type: memory }
          offsite: { type: memory }
        codecs:
          vault: { type: xchacha20poly1305, keys: [{ id: k1, env: VAULT_KEY }] }
        store: { providers: [primary, offsite] }
        jobs:
          - { name: copy-settings, type: migrate, from: primary, to: offsite }
          - { type: sync }
        """.write(toFile: pipeline, atomically: true, encoding: .utf8)
    }

    /// The shells find `cloudsync` on PATH, as an installed one is.
    var path: String { (executable as NSString).deletingLastPathComponent + ":/usr/bin:/bin" }

    @Test func theHiddenEntryListsWhatTheFileDeclaresAndNothingForAFileThatDoesNotLoad() async throws {
        let jobs = try await ProcessRunner.run(executable, ["__complete", "jobs", pipeline])
        #expect(jobs.status == 0)
        #expect(jobs.standardOutput == "copy-settings\n2-sync\n")
        let providers = try await ProcessRunner.run(executable, ["__complete", "providers", pipeline])
        #expect(providers.standardOutput == "primary\noffsite\n")
        let codecs = try await ProcessRunner.run(executable, ["__complete", "codecs", pipeline])
        #expect(codecs.standardOutput == "vault\n")
        let broken = directory.file("broken.yaml")
        try "version: 1\nname: [".write(toFile: broken, atomically: true, encoding: .utf8)
        let none = try await ProcessRunner.run(executable, ["__complete", "jobs", broken])
        #expect(none.status == 0)
        #expect(none.standardOutput.isEmpty && none.standardError.isEmpty)
        let help = try await ProcessRunner.run(executable, ["--help"])
        #expect(!help.standardOutput.contains("__complete"))
    }

    @Test func bashCompletesJobsAndProvidersFromTheFileOnTheLine() async throws {
        let script = directory.file("cloudsync.bash")
        try await ProcessRunner.run(executable, ["completions", "bash"]).standardOutput.write(
            toFile: script, atomically: true, encoding: .utf8)
        func complete(_ words: [String]) async throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let run = try await ProcessRunner.run(
                "/usr/bin/env",
                [
                    "PATH=\(path)", "/bin/bash", "-c",
                    "cd '\(directory.path)'; source '\(script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); "
                        + "_cloudsync; printf '%s\\n' \"${COMPREPLY[@]}\"",
                ])
            #expect(run.status == 0, "\(run.standardError)")
            return run.standardOutput.split(separator: "\n").map(String.init)
        }
        await #expect(try complete(["cloudsync", "run", "nightly.yaml", "--job", ""]) == ["copy-settings", "2-sync"])
        await #expect(try complete(["cloudsync", "run", "--dry-run", "nightly.yaml", "-j", "c"]) == ["copy-settings"])
        await #expect(
            try complete(["cloudsync", "login", "nightly.yaml", "--provider", ""]) == ["primary", "offsite"])
        await #expect(
            try complete(["cloudsync", "snapshots", "nightly.yaml", "--repository", "o"]) == ["offsite"])
        await #expect(try complete(["cloudsync", "snapshots", "nightly.yaml", "--codec", ""]) == ["vault"])
        // No file on the line yet: nothing to offer, and nothing printed into the line.
        await #expect(try complete(["cloudsync", "run", "--job", ""]) == [])
    }

    @Test func fishCompletesSubcommandsOptionsChoicesAndNames() async throws {
        let fish = "/usr/bin/fish"
        try #require(
            FileManager.default.isExecutableFile(atPath: fish), "fish is needed (Debian's fish; make test installs it)")
        let script = directory.file("cloudsync.fish")
        try await ProcessRunner.run(executable, ["completions", "fish"]).standardOutput.write(
            toFile: script, atomically: true, encoding: .utf8)
        func complete(_ line: String) async throws -> [String] {
            let run = try await ProcessRunner.run(
                "/usr/bin/env",
                [
                    "PATH=\(path)", "HOME=\(directory.path)", "XDG_CONFIG_HOME=\(directory.path)", fish,
                    "--no-config", "-c", "cd '\(directory.path)'; source '\(script)'; complete -C '\(line)'",
                ])
            #expect(run.status == 0, "\(run.standardError)")
            // Each candidate is its word, a tab, and its description.
            return run.standardOutput.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }
        }
        let subcommands = try await complete("cloudsync ")
        for name in ["run", "serve", "validate", "outbox", "cloudkit", "man", "completions", "help"] {
            #expect(subcommands.contains(name), "fish offers no \(name)")
        }
        await #expect(try complete("cloudsync outbox ") == ["discard", "flush", "list"])
        await #expect(try complete("cloudsync run nightly.yaml --progress ") == ["always", "auto", "never"])
        await #expect(try complete("cloudsync run nightly.yaml --job ") == ["2-sync", "copy-settings"])
        await #expect(try complete("cloudsync logout nightly.yaml --provider ") == ["offsite", "primary"])
        await #expect(try complete("cloudsync completions ") == ["bash", "fish", "zsh"])
        let runOptions = try await complete("cloudsync run nightly.yaml --")
        for option in ["--job", "--dry-run", "--report", "--progress", "--help"] {
            #expect(runOptions.contains(option), "fish offers no \(option) for run")
        }
    }
}
