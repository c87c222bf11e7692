import CloudSync

/// The `cloudsync` command: parses arguments, runs what they ask for, and says what happened.
///
/// Machine output goes to `standardOutput`, messages for people to `standardError`, so the executable stays a
/// thin wrapper and tests can run the command in-process.
public struct CommandLineTool {
    public typealias Writer = (String) -> Void

    private let standardOutput: Writer
    private let standardError: Writer

    public init(standardOutput: @escaping Writer, standardError: @escaping Writer) {
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    static let usage = "cloudsync [--version] [--help]"

    static let help = """
        OVERVIEW: Run CloudSync pipelines: one key-value store over several storage providers, with sync,
        migration, quota audits and encrypted backups driven by YAML pipeline files.

        USAGE: \(usage)

        OPTIONS:
          --version               Print the version and exit.
          -h, --help              Show this help and exit.

        EXIT CODES:
          0    success
          1    the command ran and something it did failed
          64   the command line was wrong; nothing was done

        """

    /// Runs the command with `arguments` (without the program name) and returns its exit status.
    public func run(_ arguments: [String]) -> ExitCode {
        guard let first = arguments.first else {
            return usageError("no command given")
        }
        switch first {
        case "--version":
            guard arguments.count == 1 else { return usageError("unexpected argument '\(arguments[1])'") }
            standardOutput("cloudsync \(CloudSyncVersion.current)\n")
            return .success
        case "-h", "--help", "help":
            standardOutput(Self.help)
            return .success
        default:
            let what = first.hasPrefix("-") ? "unknown option" : "unknown command"
            return usageError("\(what) '\(first)'")
        }
    }

    private func usageError(_ message: String) -> ExitCode {
        standardError("Error: \(message)\nUsage: \(Self.usage)\n  See 'cloudsync --help'.\n")
        return .usage
    }
}
