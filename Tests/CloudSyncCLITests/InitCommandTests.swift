import CloudSync
import CloudSyncCrypto
import CloudSyncPipeline
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// `cloudsync init`: every template loads, the local ones run twice from an empty directory, and nothing that exists
/// is ever replaced.
@Suite(.timeLimit(.minutes(10))) struct InitCommandTests {
    let executable: String
    let directory: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    /// What the cloud templates need set to load, with made-up values: nothing is contacted when a file is validated.
    static let variables = [
        "CLOUDSYNC_S3_BUCKET": "backups", "CLOUDSYNC_S3_ENDPOINT": "http://127.0.0.1:9",
        "GDRIVE_CLIENT_ID": "client.apps.googleusercontent.com", "GDRIVE_CLIENT_SECRET": "client-secret",
        "CK_CONTAINER": "iCloud.com.example.app", "CK_API_TOKEN": "api-token",
    ]

    /// Runs `cloudsync` in-process with `environment` alone.
    func cloudsync(_ arguments: [String], environment: [String: String] = variables) async -> (
        status: ExitCode, standardOutput: String, standardError: String
    ) {
        let ran = await inProcessCloudsync(arguments, environment: environment)
        return (ran.status, ran.output, ran.errors)
    }

    /// Runs the built `cloudsync` in the temporary directory, as a person would in a shell.
    func shell(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessResult {
        try await ProcessRunner.run(
            executable, arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
            currentDirectory: directory.path)
    }

    func names() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    func bytes(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

    func text(of path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    @Test(arguments: PipelineTemplates.all.map(\.name))
    func everyTemplateLoadsWithoutAnErrorOrWarning(_ template: String) async throws {
        let file = directory.file("nightly.yaml")
        let written = await cloudsync(["init", "--template", template, file])
        #expect(written.status == .success, "\(written.standardError)")
        #expect(written.standardOutput.isEmpty)
        let validated = await cloudsync(["validate", file])
        #expect(validated.status == .success, "\(validated.standardError)")
        // The one warning a template may carry is the one its header explains: a move from Drive, which takes no
        // conditional removals.
        if template == "drive-to-cloudkit" {
            #expect(validated.standardOutput == "\(file): valid (1 warning)\n")
            #expect(
                validated.standardError.contains("warning: job `drive-to-cloudkit` (move): provider `drive` takes no"))
            #expect(text(of: file).contains("Drive takes no\n# conditional deletes"))
        } else {
            #expect(validated.standardOutput == "\(file): valid\n")
            #expect(validated.standardError.isEmpty, "a warning: \(validated.standardError)")
        }

        let text = try String(contentsOfFile: file, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "# yaml-language-server: $schema=pipeline.schema.json")
        #expect(text.contains("\nname: nightly\n"))
        #expect(text.contains("cloudsync init --template \(template)"))
        // The header is one comment: what it does, how to run it, what to edit.
        let header = lines.prefix { !$0.hasPrefix("version:") }
        #expect(header.allSatisfy { $0.hasPrefix("#") }, "\(header.filter { !$0.hasPrefix("#") })")
        for part in ["# What it does:", "cloudsync run ", "nightly.yaml"] {
            #expect(header.contains { $0.contains(part) }, "the header lacks \(part)")
        }
        #expect(header.contains { $0.contains("What to edit:") })

        // What editors check it against: the JSON Schema its first line names.
        let python = root + "/.build/pyenv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the tests' Python environment is missing: run `make test`")
            return
        }
        let check = try await ProcessRunner.run(
            python, [root + "/scripts/check_schema.py", root + "/schemas/pipeline.schema.json", file])
        #expect(check.standardOutput == "PASS \(file)\n", "\(check.standardOutput)")
    }

    @Test(arguments: PipelineTemplates.all.map(\.name))
    func everyVariableATemplateNeedsIsNamedInItsHeader(_ template: String) async throws {
        let file = directory.file("nightly.yaml")
        #expect(await cloudsync(["init", "--template", template, file]).status == .success)
        let validated = await cloudsync(["validate", file], environment: [:])
        let missing = validated.standardError.matches(of: #/environment variable (\w+) is not set/#).map {
            String($0.output.1)
        }
        let header = try String(contentsOfFile: file, encoding: .utf8).components(separatedBy: "\nversion: 1\n")[0]
        for variable in missing {
            #expect(header.contains("#   \(variable) ") || header.contains("#      \(variable) "), "\(variable)")
        }
        switch template {
        case "s3-backup": #expect(Set(missing) == ["CLOUDSYNC_S3_BUCKET", "CLOUDSYNC_S3_ENDPOINT"])
        case "drive-to-cloudkit":
            #expect(Set(missing) == ["GDRIVE_CLIENT_ID", "GDRIVE_CLIENT_SECRET", "CK_CONTAINER", "CK_API_TOKEN"])
        default: #expect(validated.status == .success, "\(validated.standardError)")
        }
    }

    @Test func theStarterRunsAsItIsTwiceFromAnEmptyDirectory() async throws {
        let written = try await shell(["init", "starter.yaml"])
        #expect(written.status == 0, "\(written.standardError)")
        #expect(written.standardOutput.isEmpty)
        #expect(
            written.standardError
                == "wrote starter.yaml (pipeline starter, template starter)\nnext: cloudsync run starter.yaml\n")
        #expect(try names() == ["starter.yaml"])

        let first = try await shell(["run", "starter.yaml"])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(first.standardError.contains("sample-keys (migrate): ok — copied 3,"))
        #expect(first.standardError.contains("repaired 3"))
        #expect(first.standardError.contains("space (quota): ok — providers 2, warnings 0"))
        let second = try await shell(["run", "starter.yaml"])
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardError.contains("inSync 3"))
        #expect(try names() == [".cloudsync", "data", "starter.yaml"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.file("data/starter/backup")).sorted() == [
                "notes.welcome", "settings.language", "settings.theme",
            ])
    }

    @Test func theEncryptedBackupRunsTwiceMakingTwoSnapshotsWithANewKeyOfMode0600() async throws {
        let written = try await shell(["init", "--template", "encrypted-backup", "vault.yaml"])
        #expect(written.status == 0, "\(written.standardError)")
        #expect(written.standardError.contains("wrote a new key to vault.key (mode 0600)"))
        #expect(written.standardError.hasSuffix("next: cloudsync run vault.yaml\n"))
        #expect(try names() == ["vault.key", "vault.yaml"])
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.file("vault.key"))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let key = try String(contentsOfFile: directory.file("vault.key"), encoding: .utf8)
        #expect(key.hasSuffix("\n") && Data(base64Encoded: String(key.dropLast()))?.count == 32)

        for run in 1...2 {
            let result = try await shell(["run", "vault.yaml"])
            #expect(result.status == 0, "run \(run): \(result.standardError)")
            #expect(result.standardError.contains("backup (backup): ok"))
            #expect(result.standardError.contains("check (verify): ok"))
        }
        let listed = try await shell(["snapshots", "vault.yaml", "--repository", "repository", "--json"])
        #expect(listed.status == 0, "\(listed.standardError)")
        let snapshots = try #require(
            try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]])
        #expect(snapshots.count == 2)
        #expect(snapshots.allSatisfy { $0["keys"] as? Int == 3 && $0["pipeline"] as? String == "vault" })
        #expect(try bytes(directory.file("vault.key")) == Data(key.utf8))
    }

    @Test func anExistingKeyFileIsUsedAndNeverReplaced() async throws {
        try generateKeyFile(at: directory.file("vault.key"))
        let key = try bytes(directory.file("vault.key"))
        let written = try await shell(["init", "--template", "encrypted-backup", "vault.yaml"])
        #expect(written.status == 0, "\(written.standardError)")
        #expect(written.standardError.contains("vault.key already holds a key: kept as it is"))
        #expect(try bytes(directory.file("vault.key")) == key)
        #expect(try await shell(["run", "vault.yaml"]).status == 0)
        #expect(try bytes(directory.file("vault.key")) == key)

        // Something that is not a key in its place: nothing is written, and it stays as it was.
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: directory.file("other.key")))
        let refused = try await shell(["init", "--template", "s3-backup", "other.yaml"])
        #expect(refused.status == 73)
        #expect(refused.standardError.hasPrefix("Error: other.key, where the pipeline's key file goes, is not a key"))
        #expect(try bytes(directory.file("other.key")) == Data("not a key\n".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory.file("other.yaml")))

        // A FILE that would be its own key file.
        let same = try await shell(["init", "--template", "encrypted-backup", "same.key"])
        #expect(same.status == 73)
        #expect(same.standardError.hasPrefix("Error: same.key would be both the pipeline file and its key file"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("same.key")))
    }

    @Test func anExistingFileIsRefusedAndLeftAsItWas() async throws {
        let file = directory.file("nightly.yaml")
        let original = Data("version: 1\nname: mine\n# my own\n".utf8)
        try original.write(to: URL(fileURLWithPath: file))
        for template in PipelineTemplates.all.map(\.name) {
            let result = await cloudsync(["init", "--template", template, file])
            #expect(result.status == .cannotCreate)
            #expect(result.standardOutput.isEmpty)
            #expect(
                result.standardError
                    == "Error: \(file) already exists; init only creates new files, it never overwrites one. Give "
                    + "FILE another name (the pipeline's name is taken from it), or move \(file) away first\n")
            #expect(try bytes(file) == original)
        }
        // No key file was made for a pipeline that was not written.
        #expect(try names() == ["nightly.yaml"])

        // Nor through a symbolic link (to a file, to nowhere, to /dev/null), nor over a FIFO, a device or a directory.
        // /dev/null itself only when not root: as root, a regression that replaced it would break the machine (a
        // mutation of this code once did); a FIFO and the link to it stand in, and fail the same way.
        try FileManager.default.createSymbolicLink(atPath: directory.file("link.yaml"), withDestinationPath: file)
        try FileManager.default.createSymbolicLink(atPath: directory.file("dangling.yaml"), withDestinationPath: "gone")
        try FileManager.default.createSymbolicLink(
            atPath: directory.file("null.yaml"), withDestinationPath: "/dev/null")
        #expect(mkfifo(directory.file("fifo.yaml"), 0o600) == 0)
        let targets =
            ["link.yaml", "dangling.yaml", "null.yaml", "fifo.yaml"].map(directory.file) + [directory.path]
            + (getuid() == 0 ? [] : ["/dev/null"])
        for path in targets {
            let result = await cloudsync(["init", path])
            #expect(result.status == .cannotCreate, "\(path)")
            #expect(result.standardError.hasPrefix("Error: \(path) "), "\(result.standardError)")
        }
        #expect(try bytes(file) == original)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory.file("dangling.yaml")) == "gone")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory.file("null.yaml")) == "/dev/null")
        #expect(!FileManager.default.fileExists(atPath: directory.file("gone")))
        var status = stat()
        #expect(lstat(directory.file("fifo.yaml"), &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
        #expect(stat("/dev/null", &status) == 0 && status.st_mode & S_IFMT == S_IFCHR)
        #expect(try names() == ["dangling.yaml", "fifo.yaml", "link.yaml", "nightly.yaml", "null.yaml"])
    }

    @Test func aMissingDirectoryIsNamed() async throws {
        let result = try await shell(["init", "conf/nightly.yaml"])
        #expect(result.status == 73)
        #expect(
            result.standardError
                == "Error: cannot create conf/nightly.yaml: the directory conf does not exist; create it first "
                + "(mkdir -p conf) or give a path in an existing directory\n")
        #expect(try names() == [])
    }

    @Test func anUnknownTemplateIsRefusedWithADidYouMean() async throws {
        let result = try await shell(["init", "--template", "encrypted-bakup", "nightly.yaml"])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError
                == "Error: the value 'encrypted-bakup' is invalid for '--template'; pick starter, encrypted-backup, "
                + "s3-backup or drive-to-cloudkit; did you mean 'encrypted-backup'?\nUsage: cloudsync init FILE "
                + "[--template starter|encrypted-backup|s3-backup|drive-to-cloudkit]\n  See 'cloudsync help init'.\n")
        #expect(try names() == [])
    }

    /// A name cut short is too many edits from any template, but begins exactly one: that one is suggested.
    ///
    /// Two letters, or a start several share, suggest nothing.
    @Test func aTemplateNameCutShortSuggestsTheOneItBegins() async throws {
        for (typed, suggested) in [("encrypted", "encrypted-backup"), ("drive", "drive-to-cloudkit"), ("dr", nil)] {
            let result = try await shell(["init", "--template", typed, "nightly.yaml"])
            #expect(result.status == 64)
            if let suggested {
                #expect(result.standardError.contains("; did you mean '\(suggested)'?"), "\(typed)")
            } else {
                #expect(!result.standardError.contains("did you mean"), "\(typed)")
            }
        }
        #expect(closest("s3", among: ["s3-backup", "starter"]) == nil)
        #expect(closest("sta", among: ["starter", "state"]) == nil)
        #expect(closest("stat", among: ["starter", "state"]) == "state")
    }

    @Test func aDashPrintsTheTemplateAndWritesNothing() async throws {
        let result = try await shell(["init", "--template", "encrypted-backup", "-"])
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("# yaml-language-server: $schema="))
        #expect(result.standardOutput.contains("\nname: encrypted-backup\n"))
        #expect(result.standardError.contains("cloudsync keygen --out encrypted-backup.key"))
        #expect(try names() == [])
    }

    /// Installed, the schema comment names the schema `make install` put beside the executable.
    @Test func anInstalledCloudsyncNamesItsInstalledSchema() async throws {
        let prefix = directory.file("usr")
        let schemas = prefix + "/share/doc/cloudsync/schemas"
        try FileManager.default.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: schemas, withIntermediateDirectories: true)
        if link(executable, prefix + "/bin/cloudsync") != 0 {
            try FileManager.default.copyItem(atPath: executable, toPath: prefix + "/bin/cloudsync")
        }
        try FileManager.default.copyItem(
            atPath: root + "/schemas/pipeline.schema.json", toPath: schemas + "/pipeline.schema.json")
        let result = try await ProcessRunner.run(prefix + "/bin/cloudsync", ["init", "-"])
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").prefix(2)
        #expect(
            lines == [
                "# yaml-language-server: $schema=\(schemas)/pipeline.schema.json",
                "# starter: a starter pipeline; it runs as it is.",
            ])
    }

    @Test func helpListsEveryTemplate() async throws {
        let result = try await shell(["init", "--help"])
        #expect(result.status == 0)
        #expect(
            result.standardOutput.contains(
                "USAGE: cloudsync init FILE [--template starter|encrypted-backup|s3-backup|drive-to-cloudkit]\n"))
        for template in PipelineTemplates.all {
            #expect(result.standardOutput.contains("\n\(template.name): "), "\(template.name)")
        }
    }

    @Test(arguments: [
        ("nightly.yaml", "nightly"), ("nightly.sync.yml", "nightly.sync"), ("x", "x"),
        ("café nightly.yaml", "cafe-nightly"),
        (".hidden.yaml", "hidden"), ("..yaml", "pipeline"), ("--a  b--.yaml", "a-b"), ("ü.yaml", "u"),
        ("null.yaml", "null"),
        ("2026.yaml", "2026"), ("a'b.yaml", "a-b"),
    ])
    func thePipelineIsNamedAfterItsFile(file: String, name: String) async throws {
        #expect(CommandLineTool.pipelineName(forFile: file) == name)
        let result = try await shell(["init", "--template", "encrypted-backup", "--", file])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(FileManager.default.fileExists(atPath: directory.file(name + ".key")))
        let validated = await cloudsync(["validate", "--", directory.file(file)])
        #expect(validated.status == .success, "\(validated.standardError)")
        let plan = await cloudsync(["plan", "--json", directory.file(file)])
        #expect(plan.standardOutput.contains("\"name\" : \"\(name)\""), "\(plan.standardOutput.prefix(300))")
    }

    @Test func theS3BackupRunsTwiceAgainstMoto() async throws {
        let moto = try await MotoS3Server.start(repository: root, buckets: ["backups"])
        let environment = [
            "CLOUDSYNC_S3_BUCKET": "backups", "CLOUDSYNC_S3_ENDPOINT": moto.endpoint.absoluteString,
            "AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto",
        ]
        #expect(try await shell(["init", "--template", "s3-backup", "offsite.yaml"]).status == 0)
        for run in 1...2 {
            let result = try await shell(["run", "offsite.yaml"], environment: environment)
            #expect(result.status == 0, "run \(run): \(result.standardError)")
        }
        let listed = try await shell(
            ["snapshots", "offsite.yaml", "--repository", "bucket", "--json"], environment: environment)
        #expect(listed.status == 0, "\(listed.standardError)")
        let snapshots = try JSONSerialization.jsonObject(with: Data(listed.standardOutput.utf8)) as? [[String: Any]]
        #expect(snapshots?.count == 2)
        await moto.stopped()
    }
}
