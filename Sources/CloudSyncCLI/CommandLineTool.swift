import CloudSync
import CloudSyncCrypto
import CloudSyncPipeline
import Foundation

/// The `cloudsync` command: parses arguments, runs what they ask for, and says what happened.
///
/// Machine output goes to `standardOutput`, messages for people to `standardError`, so the executable stays a
/// thin wrapper and tests can run the command in-process.
public struct CommandLineTool {
    /// Where text goes: called with each piece of output, newlines included, in order.
    public typealias Writer = @Sendable (String) -> Void

    let standardOutput: Writer
    let standardError: Writer
    let environment: [String: String]
    let registry: ProviderRegistry

    /// A command writing machine output to `standardOutput` and messages to `standardError`, reading variables from
    /// `environment` (for `${env:...}`, key sources and `NO_COLOR`) and provider types from `registry`.
    public init(
        standardOutput: @escaping Writer, standardError: @escaping Writer,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        registry: ProviderRegistry = BuiltInProviders.registry
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.environment = environment
        self.registry = registry
    }

    static let usage = "cloudsync <subcommand> [options] | cloudsync [--version] [--help]"

    static let help = """
        OVERVIEW: Run CloudSync pipelines: one key-value store over several storage providers, with sync,
        migration, quota audits and encrypted backups driven by YAML pipeline files.

        USAGE: \(usage)

        SUBCOMMANDS:
          run FILE [--job NAME]... [--dry-run] [--report PATH|-] [--yes] [--quiet] [--progress auto|always|never]
                                  Run a pipeline's jobs in order and write a JSON report.
          validate FILE...        Check pipeline files; print every error with file:line:col.
          plan FILE [--json]      Show what a pipeline compiles to (providers, caps, key rules, codecs by key id,
                                  outbox limits, jobs), without touching any provider.
          schema pipeline|report  Print the JSON Schema of pipeline files or of run reports.
          outbox list|flush|discard FILE
                                  Show, retry or drop the writes waiting in a pipeline's outbox.
          history FILE [--limit N] [--json]
                                  List the pipeline's last runs (default 20), newest first.
          keygen --out FILE       Write a new 32-byte key file (mode 0600; never overwrites).

        OPTIONS:
          --version               Print the version and exit.
          -h, --help              Show this help and exit.

        EXIT CODES:
          0    success
          1    a job finished with failed keys, or a quota warning under failOnWarning
          2    a job could not run (a provider unavailable for it, a refused clear, unreadable state)
          3    every job succeeded but writes wait in the outbox for a provider that could not take them
          64   the command line or a pipeline file was wrong; nothing was done
          75   another run of the same pipeline is in progress
          130  interrupted (SIGINT or SIGTERM); the report says how far it got

        """

    /// Runs the command with `arguments` (without the program name) and returns its exit status.
    public func run(_ arguments: [String]) async -> ExitCode {
        guard let first = arguments.first else {
            return usageError("no command given")
        }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "--version":
            guard rest.isEmpty else { return usageError("unexpected argument '\(rest[0])'") }
            standardOutput("cloudsync \(CloudSyncVersion.current)\n")
            return .success
        case "-h", "--help", "help":
            standardOutput(Self.help)
            return .success
        case "validate":
            return validate(rest)
        case "run":
            return await runPipeline(rest)
        case "outbox":
            return await outbox(rest)
        case "history":
            return history(rest)
        case "plan":
            return plan(rest)
        case "schema":
            switch rest {
            case ["pipeline"]: standardOutput(PipelineSchema.json(registry: registry) + "\n")
            case ["report"]: standardOutput(ReportSchema.json + "\n")
            default: return usageError("schema takes one argument: pipeline or report")
            }
            return .success
        case "keygen":
            guard rest.count == 2, rest[0] == "--out" else { return usageError("keygen needs --out FILE") }
            do {
                try generateKeyFile(at: rest[1])
                standardError(
                    "wrote a new key to \(rest[1]) (mode 0600); keep a copy: without it, nothing encrypted with it can be read\n"
                )
                return .success
            } catch {
                standardError("Error: \(error.message)\n")
                return .failure
            }
        default:
            let what = first.hasPrefix("-") ? "unknown option" : "unknown command"
            return usageError("\(what) '\(first)'")
        }
    }

    /// Loads and compiles one file, printing its errors; nil when it has any.
    func compile(_ path: String) -> CompiledPipeline? {
        do {
            let spec = try PipelineLoader.load(path: path, registry: registry, environment: environment)
            return try PipelineCompiler.compile(spec, environment: environment)
        } catch {
            let count = error.diagnostics.count
            standardError(error.description + "\n")
            standardError("\(path): \(count) error\(count == 1 ? "" : "s")\n")
            return nil
        }
    }

    private func validate(_ files: [String]) -> ExitCode {
        if let option = files.first(where: { $0.hasPrefix("-") }) { return usageError("unknown option '\(option)'") }
        guard !files.isEmpty else { return usageError("validate needs at least one pipeline file") }
        var valid = true
        for file in files {
            if compile(file) != nil {
                standardError("\(file): valid\n")
            } else {
                valid = false
            }
        }
        return valid ? .success : .usage
    }

    private func plan(_ arguments: [String]) -> ExitCode {
        let json = arguments.contains("--json")
        let files = arguments.filter { $0 != "--json" }
        if let option = files.first(where: { $0.hasPrefix("-") }) { return usageError("unknown option '\(option)'") }
        guard files.count == 1 else { return usageError("plan needs exactly one pipeline file") }
        guard let compiled = compile(files[0]) else { return .usage }
        let plan = PipelinePlan(compiled)
        standardOutput(json ? plan.json() : plan.text())
        return .success
    }

    func usageError(_ message: String) -> ExitCode {
        standardError("Error: \(message)\nUsage: \(Self.usage)\n  See 'cloudsync --help'.\n")
        return .usage
    }
}
