import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// The manual pages: one per subcommand and one for the file format, made from the command specs and the registries,
/// each clean under groff's warnings.
@Suite struct ManPageTests {
    let pages = ManPages(
        version: "1.2.3", registry: BuiltInProviders.registry, jobTypes: BuiltInJobs.registry,
        documentation: "/usr/share/doc/cloudsync")

    @Test func thereIsAPageForTheToolEverySubcommandAndTheFileFormat() {
        var expected = ["cloudsync.1"]
        for command in Commands.all {
            expected.append("cloudsync-" + command.path.joined(separator: "-") + ".1")
            expected += command.subcommands.map { "cloudsync-" + $0.path.joined(separator: "-") + ".1" }
        }
        #expect(pages.all.map(\.fileName) == expected + ["cloudsync-pipeline.5"])
        #expect(pages.page(named: "outbox list")?.fileName == "cloudsync-outbox-list.1")
        #expect(pages.page(named: "outbox-list")?.fileName == "cloudsync-outbox-list.1")
        #expect(pages.page(named: "pipeline")?.section == 5)
    }

    @Test func aSubcommandsPageHasEveryOptionAndExitCodeItsHelpHas() throws {
        for command in Commands.all.flatMap({ [$0] + $0.subcommands }) {
            let name = "cloudsync-" + command.path.joined(separator: "-")
            let page = try #require(pages.page(named: name)).text
            #expect(page.hasPrefix(".TH \"\(pages.escape(name.uppercased()))\" 1 \"\" \"cloudsync 1.2.3\""))
            for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SEE ALSO"] {
                #expect(page.contains("\n.SH \(section)\n"), "\(name) lacks \(section)")
            }
            for option in command.allOptions {
                #expect(page.contains("\\fB" + pages.escape(option.long) + "\\fR"), "\(name) lacks \(option.long)")
            }
            for (code, _) in command.exitCodes {
                #expect(page.contains(".TP\n\\fB\(code.rawValue)\\fR\n"), "\(name) lacks exit code \(code.rawValue)")
            }
        }
    }

    @Test func theFormatPageHasEveryProviderAndJobTypeAndTheirFields() throws {
        let page = try #require(pages.page(named: "pipeline")).text
        for type in BuiltInProviders.registry.types {
            #expect(page.contains(".SS \"type: \(type.name)\""))
            for field in type.fields { #expect(page.contains(pages.escape("providers.<id>.\(field.name)"))) }
        }
        for type in BuiltInJobs.registry.types {
            #expect(page.contains(".SS \"type: \(type.name)\""))
            for count in type.counts { #expect(page.contains("\\fB\(pages.escape(count.name))\\fR")) }
        }
        for field in ["version", "name", "state", "schedule.cron", "store.writeMode", "store.outbox.maxAttempts"] {
            #expect(page.contains(".TP\n\\fB\(pages.escape(field))\\fR\n"), "lacks \(field)")
        }
    }

    @Test func textIsEscapedSoRoffPrintsItAsWritten() {
        #expect(pages.escape(".start and 'quote") == "\\&.start and 'quote")
        #expect(pages.escape("x\n'quote") == "x\n\\&'quote")
        #expect(pages.escape(#"a\b --flag"#) == #"a\eb \-\-flag"#)
        #expect(pages.escape("≥ 1 — é") == "\\[u2265] 1 \\[u2014] \\[u00E9]")
    }

    /// groff's own check, every warning on: a request it does not know, a bad escape or an unknown character is
    /// printed, so an empty output is a clean page.
    @Test func groffFindsNothingToWarnAboutInAnyPage() async throws {
        let directory = try TemporaryDirectory(prefix: "man-pages")
        for page in pages.all {
            let path = directory.path + "/" + page.fileName
            try page.text.write(toFile: path, atomically: true, encoding: .utf8)
            let check = try await ProcessRunner.run("/usr/bin/env", ["groff", "-ww", "-man", "-Tutf8", "-z", path])
            #expect(check.status == 0, "groff is needed (Debian's groff-base): \(check.standardError)")
            #expect(check.standardError.isEmpty, "\(page.fileName): \(check.standardError)")
        }
    }

    @Test func theCommandPrintsAPageOrWritesThemAllAndRefusesAnUnknownOne() async throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let run = try await ProcessRunner.run(executable, ["man", "run"])
        #expect(run.status == 0)
        #expect(run.standardOutput.hasPrefix(".TH \"CLOUDSYNC\\-RUN\" 1 "))
        let wrong = try await ProcessRunner.run(executable, ["man", "pipline"])
        #expect(wrong.status == 64)
        #expect(wrong.standardError.contains("no manual page 'pipline'"))
        #expect(wrong.standardError.contains("did you mean 'pipeline'?"))

        let directory = try TemporaryDirectory(prefix: "man-output")
        // A link where a page goes is replaced, never written through.
        let elsewhere = directory.path + "/elsewhere"
        try "keep me".write(toFile: elsewhere, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory.path + "/man/man1", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: directory.path + "/man/man1/cloudsync.1", withDestinationPath: elsewhere)
        let all = try await ProcessRunner.run(
            executable, ["man", "--output", directory.path + "/man", "--doc-dir", "/opt/doc"])
        #expect(all.status == 0, "\(all.standardError)")
        #expect(try String(contentsOfFile: elsewhere, encoding: .utf8) == "keep me")
        let tool = try String(contentsOfFile: directory.path + "/man/man1/cloudsync.1", encoding: .utf8)
        #expect(tool.contains(".IR /opt/doc ,"))
        #expect(FileManager.default.fileExists(atPath: directory.path + "/man/man5/cloudsync-pipeline.5"))
        let written = try FileManager.default.contentsOfDirectory(atPath: directory.path + "/man/man1").count
        #expect(written == pages.all.count - 1)
    }
}
