import CloudSync
import CloudSyncPipeline
import Foundation

/// The `cloudsync` command: parses arguments, runs what they ask for, and says what happened.
///
/// Machine output goes to `standardOutput`, messages for people to `standardError`, so the executable stays a
/// thin wrapper and tests can run the command in-process.
public struct CommandLineTool {
    public typealias Writer = (String) -> Void

    private let standardOutput: Writer
    private let standardError: Writer
    private let environment: [String: String]

    public init(
        standardOutput: @escaping Writer, standardError: @escaping Writer,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
        self.environment = environment
    }

    static let usage = "cloudsync <subcommand> [options] | cloudsync [--version] [--help]"

    static let help = """
        OVERVIEW: Run CloudSync pipelines: one key-value store over several storage providers, with sync,
        migration, quota audits and encrypted backups driven by YAML pipeline files.

        USAGE: \(usage)

        SUBCOMMANDS:
          validate FILE...        Check pipeline files; print every error with file:line:col.
          plan FILE [--json]      Show what a pipeline compiles to (providers, caps, key rules, codecs by key id,
                                  outbox limits, jobs), without touching any provider.
          schema pipeline         Print the JSON Schema of pipeline files.

        OPTIONS:
          --version               Print the version and exit.
          -h, --help              Show this help and exit.

        EXIT CODES:
          0    success
          1    the command ran and something it did failed
          64   the command line or a pipeline file was wrong; nothing was done

        """

    /// Runs the command with `arguments` (without the program name) and returns its exit status.
    public func run(_ arguments: [String]) -> ExitCode {
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
        case "plan":
            return plan(rest)
        case "schema":
            guard rest == ["pipeline"] else { return usageError("schema takes one argument: pipeline") }
            standardOutput(PipelineSchema.json + "\n")
            return .success
        default:
            let what = first.hasPrefix("-") ? "unknown option" : "unknown command"
            return usageError("\(what) '\(first)'")
        }
    }

    /// Loads and compiles one file, printing its errors; nil when it has any.
    private func compile(_ path: String) -> CompiledPipeline? {
        do {
            let spec = try PipelineLoader.load(path: path, environment: environment)
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

    private func usageError(_ message: String) -> ExitCode {
        standardError("Error: \(message)\nUsage: \(Self.usage)\n  See 'cloudsync --help'.\n")
        return .usage
    }
}
