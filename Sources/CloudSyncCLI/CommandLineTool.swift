import CloudSync
import CloudSyncCrypto
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

/// The `cloudsync` command: parses arguments, runs what they ask for, and says what happened.
///
/// Machine output goes to `standardOutput`, messages for people to `standardError`, so the executable stays a
/// thin wrapper and tests can run the command in-process.
package struct CommandLineTool {
    /// Where text goes: called with each piece of output, newlines included, in order.
    package typealias Writer = @Sendable (String) -> Void

    /// Reads one line a person typed, without its newline; nil at the end of the input.
    package typealias Reader = @Sendable () -> String?

    let standardOutput: Writer
    let standardError: Writer
    let standardInput: Reader
    let environment: [String: String]
    let registry: ProviderRegistry
    let jobTypes: JobRegistry

    /// A command writing machine output to `standardOutput` and messages to `standardError`, reading what a person
    /// pastes (`login --no-browser`) from `standardInput`, variables from `environment` (for `${env:...}`, key
    /// sources and `NO_COLOR`), provider types from `registry` and job types from `jobTypes`.
    package init(
        standardOutput: @escaping Writer, standardError: @escaping Writer,
        standardInput: @escaping Reader = { readLine(strippingNewline: true) },
        environment: [String: String] = ProcessInfo.processInfo.environment,
        registry: ProviderRegistry = BuiltInProviders.registry, jobTypes: JobRegistry = BuiltInJobs.registry
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.standardInput = standardInput
        self.environment = environment
        self.registry = registry
        self.jobTypes = jobTypes
    }

    static let usage = "cloudsync <subcommand> [options] | cloudsync [--version] [--help]"

    /// The top-level help: every subcommand's synopsis and what it does, then the exit codes of all of them.
    static var help: String {
        var text = """
            OVERVIEW: Run CloudSync pipelines: one key-value store over several storage providers, with sync,
            migration, quota audits and encrypted backups driven by YAML pipeline files.

            USAGE: \(usage)

            SUBCOMMANDS:

            """
        for command in Commands.all {
            for leaf in command.subcommands.isEmpty ? [command] : command.subcommands {
                text += helpEntry("\(leaf.name) \(leaf.synopsis)", leaf.abstract)
            }
        }
        text += "  See 'cloudsync help <subcommand>' for a subcommand's arguments, options and exit codes.\n\n"
        text += "OPTIONS:\n" + helpEntry("--version", "Print the version and exit; after any subcommand too.")
        text += helpEntry(CommandSpec.helpOption.label, CommandSpec.helpOption.help) + "\n"
        text += "EXIT CODES:\n" + exitCodes.map { exitCodeEntry($0.0, $0.1) }.joined()
        return text
    }

    /// What every exit status means, whichever subcommand returns it.
    static let exitCodes: [(ExitCode, String)] = [
        (.success, "success"),
        (.failure, "a job finished with failed keys, a quota warning under failOnWarning, or a sign-in failed"),
        (.jobError, "a job could not run (a provider unavailable for it, a refused clear, unreadable state)"),
        (.queued, "every job succeeded but writes wait in the outbox for a provider that could not take them"),
        (.usage, "the command line or a pipeline file was wrong; nothing was done"),
        (.unavailable, "serve could not listen on its address (in use, or not this machine's)"),
        (.cannotCreate, "keygen or init could not create its file: it exists (neither ever overwrites one)"),
        (.locked, "another run of the same pipeline is in progress"),
        (.interrupted, "interrupted (SIGINT or SIGTERM); the report says how far it got"),
    ]

    /// Runs the command with `arguments` (without the program name) and returns its exit status.
    package func run(_ arguments: [String]) async -> ExitCode {
        guard let first = arguments.first else {
            return usageError("no command given")
        }
        var rest = Array(arguments.dropFirst())
        switch first {
        case "--version":
            guard rest.isEmpty else { return usageError("unexpected argument '\(rest[0])'") }
            return printVersion()
        case "-h", "--help":
            standardOutput(Self.help)
            return .success
        case let option where option.hasPrefix("-"):
            var message = "unknown option '\(option)'"
            if let guess = closest(option, among: ["--version", "--help"]) { message += "; did you mean '\(guess)'?" }
            return usageError(message)
        default:
            break
        }
        if first == "__complete" { return completeNames(rest) }
        guard var command = Commands.all.first(where: { $0.name == first }) else {
            return usageError(Commands.unknownCommand(first, among: Commands.all.map(\.name)).message)
        }
        while !command.subcommands.isEmpty {
            if CommandSpec.asksForHelp(Array(rest.prefix(1))) {
                standardOutput(command.help)
                return .success
            }
            if CommandSpec.asksForVersion(Array(rest.prefix(1))) { return printVersion() }
            let names = command.subcommands.compactMap(\.path.last)
            guard let word = rest.first else {
                return usageError("\(command.name) needs a subcommand: \(listed(names, "or"))", command)
            }
            guard let next = command.subcommand(word) else {
                return usageError(Commands.unknownCommand(word, among: names, in: command).message, command)
            }
            command = next
            rest.removeFirst()
        }
        if CommandSpec.asksForHelp(rest) {
            standardOutput(command.help)
            return .success
        }
        if CommandSpec.asksForVersion(rest) { return printVersion() }
        let parsed: ParsedArguments
        do {
            parsed = try command.parse(rest)
        } catch {
            return usageError(error.message, command)
        }
        return await perform(command, parsed)
    }

    private func perform(_ command: CommandSpec, _ parsed: ParsedArguments) async -> ExitCode {
        switch command.path {
        case ["help"]: return help(parsed.all(Commands.helpSubcommand))
        case ["validate"]: return validate(parsed)
        case ["run"]: return await runPipeline(parsed)
        case ["serve"]: return await serve(parsed)
        case ["outbox", "list"]: return await outboxList(parsed)
        case ["outbox", "flush"]: return await outboxFlush(parsed)
        case ["outbox", "discard"]: return await outboxDiscard(parsed)
        case ["history"]: return history(parsed)
        case ["snapshots"]: return await snapshots(parsed)
        case ["repair", "index"]: return await repairIndex(parsed)
        case ["repair", "snapshots"]: return await repairSnapshots(parsed)
        case ["unlock"]: return await unlock(parsed)
        case ["restore"]: return await restoreSnapshot(parsed)
        case ["forget"]: return await forgetSnapshots(parsed)
        case ["login"]: return await login(parsed)
        case ["logout"]: return logout(parsed)
        case ["accounts", "list"]: return accountsList(parsed)
        case ["accounts", "remove"]: return accountsRemove(parsed)
        case ["cloudkit", "status"]: return await cloudkitStatus(parsed)
        case ["cloudkit", "ensure-zone"]: return await cloudkitEnsureZone(parsed)
        case ["cloudkit", "changes"]: return await cloudkitChanges(parsed)
        case ["cloudkit", "delete-zone"]: return await cloudkitDeleteZone(parsed)
        case ["plan"]: return parsed.value(Commands.planOut) == nil ? plan(parsed) : await savePlan(parsed)
        case ["apply"]: return await applySavedPlan(parsed)
        case ["migrations", "info"]: return migrationsInfo(parsed)
        case ["migrations", "repair"]: return migrationsRepair(parsed)
        case ["migrations", "undo"]: return await migrationsUndo(parsed)
        case ["keygen"]: return keygen(parsed)
        case ["man"]: return manPages(parsed)
        case ["init"]: return initPipeline(parsed)
        case ["version"]: return version(parsed)
        case ["completions"]:
            switch parsed.argument(Commands.completionsShell) {
            case "zsh": standardOutput(Completions.zsh)
            case "fish": standardOutput(Completions.fish)
            default: standardOutput(Completions.bash)
            }
            return .success
        case ["schema"]:
            if parsed.argument(Commands.schemaKind) == "pipeline" {
                standardOutput(PipelineSchema.json(registry: registry, jobTypes: jobTypes) + "\n")
            } else {
                standardOutput(ReportSchema.json(jobTypes: jobTypes) + "\n")
            }
            return .success
        default:
            return usageError("'\(command.name)' is not implemented", command)
        }
    }

    /// `cloudsync __complete jobs|providers|codecs FILE`: the names the pipeline file declares, one a line.
    ///
    /// For the completion scripts only, so help does not list it. A file that does not load gives none, and nothing
    /// on standard error: a completion must never print into the line being typed.
    private func completeNames(_ words: [String]) -> ExitCode {
        guard words.count == 2, let kind = PipelineNames(rawValue: words[0]) else { return .usage }
        guard
            let spec = try? PipelineLoader.load(
                path: words[1], registry: registry, jobTypes: jobTypes, environment: environment,
                unsetVariables: .deferred)
        else { return .success }
        let names: [String]
        switch kind {
        case .jobs: names = spec.jobs.map(\.name)
        case .providers: names = spec.providers.map(\.id)
        case .codecs: names = spec.codecs.map(\.id)
        }
        standardOutput(names.map { $0 + "\n" }.joined())
        return .success
    }

    /// `cloudsync VERSION`, as `--version` prints it anywhere and `cloudsync version` on its first line.
    private func printVersion() -> ExitCode {
        standardOutput("cloudsync \(CloudSyncVersion.current)\n")
        return .success
    }

    /// `cloudsync help [SUBCOMMAND...]`: the top-level help, or the named subcommand's.
    private func help(_ words: [String]) -> ExitCode {
        guard !words.isEmpty else {
            standardOutput(Self.help)
            return .success
        }
        do {
            standardOutput(try Commands.find(words).help)
            return .success
        } catch {
            return usageError(error.message, Commands.help)
        }
    }

    private func keygen(_ parsed: ParsedArguments) -> ExitCode {
        let path = parsed.value(Commands.keygenOut) ?? ""
        do {
            try generateKeyFile(at: path)
            standardError(
                "wrote a new key to \(path) (mode 0600); keep a copy: without it, nothing encrypted with it can be read\n"
            )
            return .success
        } catch {
            if (try? FileManager.default.attributesOfItem(atPath: path)) != nil {
                standardError(
                    "Error: \(path) already exists; refusing to overwrite a key (whatever it encrypted would be lost). "
                        + "Give --out a new path, or move the old key away first and keep it while anything needs it\n")
            } else if let missing = missingDirectory(of: path) {
                standardError(
                    "Error: cannot create \(path): the directory \(missing) does not exist; create it first "
                        + "(mkdir -p \(missing)) or give --out a path in an existing directory\n")
            } else {
                standardError("Error: \(error.message)\n")
            }
            return .cannotCreate
        }
    }

    /// The directory `path` would be created in, when it does not exist.
    func missingDirectory(of path: String) -> String? {
        let directory = directoryPart(of: path)
        var isDirectory: ObjCBool = false
        guard !directory.isEmpty, !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory)
        else { return nil }
        return directory
    }

    /// Loads and compiles one file, printing its errors; nil when it has any.
    ///
    /// A command that reads only local state (history, the outbox, the plan) passes `unsetVariables: .deferred`:
    /// provider secrets whose variables are unset are then left unread, and a note names them.
    func compile(
        _ path: String, environment: [String: String]? = nil, unsetVariables: PipelineLoader.UnsetVariables = .refused,
        amendment: PipelineAmendment? = nil
    ) -> CompiledPipeline? {
        switch load(
            path, environment: environment ?? self.environment, unsetVariables: unsetVariables, amendment: amendment)
        {
        case .success(let compiled):
            let unset = compiled.spec.unsetVariables
            if !unset.isEmpty {
                standardError(
                    "note: \(unset.map { $0.described(file: path) }.joined(separator: ", ")) "
                        + "\(unset.count == 1 ? "is" : "are") not set; this command reaches no provider, but `run` "
                        + "and `outbox flush` will need \(unset.count == 1 ? "it" : "them")\n")
            }
            return compiled
        case .failure(let error):
            let count = error.count
            standardError(error.description + "\n")
            standardError("\(path): \(count) error\(count == 1 ? "" : "s")\n")
            return nil
        }
    }

    /// Loads and compiles one file, returning its errors rather than printing them.
    func load(
        _ path: String, environment: [String: String]? = nil, unsetVariables: PipelineLoader.UnsetVariables = .refused,
        amendment: PipelineAmendment? = nil
    ) -> Result<CompiledPipeline, PipelineError> {
        let environment = environment ?? self.environment
        do {
            let spec = try PipelineLoader.load(
                path: path, registry: registry, jobTypes: jobTypes, environment: environment,
                unsetVariables: unsetVariables, amendment: amendment)
            return .success(try PipelineCompiler.compile(spec, environment: environment))
        } catch {
            return .failure(error)
        }
    }

    /// `cloudsync validate FILE... [--json]`: a verdict per file on standard output, the errors rendered with their
    /// source on standard error (or everything as JSON on standard output).
    private func validate(_ parsed: ParsedArguments) -> ExitCode {
        let json = parsed.flag(Commands.json)
        var verdicts: [FileVerdict] = []
        for file in parsed.all(Commands.validateFiles) {
            switch load(file) {
            case .success(let compiled):
                let warnings = compiled.spec.warnings.map(FileVerdict.Problem.init)
                verdicts.append(FileVerdict(file: file, valid: true, errors: [], errorCount: 0, warnings: warnings))
                if !json {
                    for warning in compiled.spec.warnings {
                        standardError(warning.rendered(source: compiled.spec.source) + "\n")
                    }
                    standardOutput(
                        "\(file): valid"
                            + (warnings.isEmpty
                                ? ""
                                : " (\(warnings.count) warning"
                                    + (warnings.count == 1 ? "" : "s") + ")") + "\n")
                }
            case .failure(let error):
                let errors = error.diagnostics.map(FileVerdict.Problem.init)
                verdicts.append(
                    FileVerdict(file: file, valid: false, errors: errors, errorCount: error.count, warnings: []))
                if !json {
                    standardError(error.description + "\n")
                    standardOutput("\(file): \(error.count) error\(error.count == 1 ? "" : "s")\n")
                }
            }
        }
        if json { standardOutput(encoded(verdicts)) }
        return verdicts.allSatisfy(\.valid) ? .success : .usage
    }

    private func plan(_ parsed: ParsedArguments) -> ExitCode {
        guard let compiled = compile(parsed.argument(Commands.file) ?? "", unsetVariables: .deferred) else {
            return .usage
        }
        let plan = PipelinePlan(compiled)
        standardOutput(parsed.flag(Commands.json) ? plan.json() : plan.text())
        return .success
    }

    /// Prints `Error: message` and the usage of `command` (or of `cloudsync` itself) on standard error.
    func usageError(_ message: String, _ command: CommandSpec? = nil) -> ExitCode {
        if let command {
            standardError(
                "Error: \(message)\nUsage: \(command.usage)\n  See 'cloudsync help \(command.name)'.\n")
        } else {
            standardError("Error: \(message)\nUsage: \(Self.usage)\n  See 'cloudsync --help'.\n")
        }
        return .usage
    }
}

/// The directory part of `path`: "" for a bare name, "/" for a name at the root. (NSString's
/// `deletingLastPathComponent` crashes on Linux for a one-character relative path, "x" or "x/".)
func directoryPart(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "" }
    var directory = trimmed[..<slash]
    while directory.count > 1, directory.hasSuffix("/") { directory.removeLast() }
    return directory.isEmpty ? "/" : String(directory)
}

/// What `validate --json` says about one file.
struct FileVerdict: Encodable {
    /// One error, located as `file:line:col`.
    struct Problem: Encodable {
        let file: String
        let line: Int
        let column: Int
        let location: String
        let message: String

        init(_ diagnostic: PipelineDiagnostic) {
            file = diagnostic.file
            line = diagnostic.mark.line
            column = diagnostic.mark.column
            location = "\(diagnostic.file):\(diagnostic.mark.line):\(diagnostic.mark.column)"
            message = diagnostic.message
        }
    }

    let file: String
    let valid: Bool
    /// The first ``PipelineError/reportedLimit`` errors, in file order.
    let errors: [Problem]
    /// How many errors the file has, those listed and those left out.
    let errorCount: Int
    /// What is worth knowing but does not make the file invalid (a provider never available on this platform).
    let warnings: [Problem]
}

/// `value` as pretty-printed JSON with sorted keys, ending with a newline.
func encoded(_ value: some Encodable) -> String {
    String(decoding: (try? JSONEncoder.sorted.encode(value)) ?? Data("null".utf8), as: UTF8.self) + "\n"
}
