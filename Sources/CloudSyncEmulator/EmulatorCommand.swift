import CloudSync
import CloudSyncHTTPServer
import Dispatch
import Foundation

/// What `cloudsync-emulator`'s command line asks for.
public struct EmulatorOptions: Sendable, Equatable {
    /// Serve Google Drive (its OAuth endpoints and the v3 API).
    public var drive = false
    /// Serve CloudKit (its web sign-in).
    public var cloudkit = false
    /// The port on 127.0.0.1; 0 picks a free one.
    public var port: UInt16 = 0
    /// Where state is kept across restarts; nil keeps it in memory.
    public var dataDirectory: String?
    /// A YAML or JSON fault plan to apply from the start.
    public var faultsFile: String?
    /// What Drive's `orderBy=name` means.
    public var driveNameOrder: DriveFilesEmulator.NameOrder = .bytes
    /// How the CloudKit database reads what the documentation leaves open (`--cloudkit-reading`).
    public var cloudKit = CloudKitDatabaseEmulator.Configuration()
    /// Serve HTTPS on a certificate made at start, its authority's certificate in a file the start line names.
    public var tls = false

    /// Nothing chosen: both clouds, a free port, memory only.
    public init() {}
}

/// A command line `cloudsync-emulator` refuses; it prints the message and the usage, and exits 64.
public struct EmulatorUsageError: Error, Sendable, Equatable {
    /// What is wrong.
    public let message: String
}

/// `cloudsync-emulator`: parses the command line, starts the chosen emulators on one loopback server, prints their
/// URLs as one JSON line, and serves until SIGINT or SIGTERM, saving state on the way out.
public enum EmulatorCommand {
    /// The usage line.
    public static let usage =
        "cloudsync-emulator [--drive] [--cloudkit] [--port N] [--data DIR] [--faults FILE] [--drive-name-order ORDER]"
        + " [--cloudkit-reading NAME=VALUE]... [--tls]"

    /// `--help`'s text.
    public static let help = """
        OVERVIEW: Serve the Google Drive and CloudKit emulators on 127.0.0.1, for running CloudSync's cloud pipelines
        and tests without an account.

        USAGE: \(usage)

        OPTIONS:
          --drive           Serve Google Drive: OAuth 2.0 with an approval that needs no person, and the v3 API.
          --cloudkit        Serve CloudKit Web Services: API token, web sign-in with no person, rotating tokens,
                            the private database's zones, records, assets and change feed.
                            (Neither flag: both.)
          --port N          Listen on 127.0.0.1:N (default: a free port).
          --data DIR        Keep state in DIR (created 0700; one JSON file per service, 0600), read at start and
                            saved on SIGINT/SIGTERM, so sign-ins and data survive a restart (default: memory only).
          --faults FILE     Apply the fault plan in FILE (YAML or JSON: {"rules": [...]}) to every request.
          --drive-name-order ORDER
                            What Drive's orderBy=name sorts by: bytes (default), caseInsensitive (as Drive's web
                            interface does), or shuffledWithinPage (as a very large folder may answer).
          --cloudkit-reading NAME=VALUE
                            How CloudKit answers where its documentation is open (repeatable; the
                            first value of each is the default):
        \(CloudKitDatabaseEmulator.Configuration.readings.map { "                    \($0.name): \($0.values.joined(separator: ", "))" }.joined(separator: "\n"))
          --tls             Serve HTTPS instead of HTTP, on a certificate for localhost and 127.0.0.1 signed by a
                            certificate authority made at start (EC P-256, valid for a day; its key is never
                            written). The authority's certificate goes to DIR/tls-ca.pem with --data, else to a
                            new directory under $TMPDIR removed on exit; each service's entry in the start line
                            names it as caFile, for clients to trust (curl --cacert FILE).
          -h, --help        Show this help and exit.

        On start it prints one JSON line on standard output with each service's URLs and test credentials, e.g.
        {"cloudkit":{"apiToken":...,"endpoint":...},"drive":{"authEndpoint":...,"clientId":...,...}}
        (with --tls every URL starts https:// and each service also has "caFile":...)

        EXIT CODES:
          0    stopped by SIGINT or SIGTERM, state saved
          1    could not start (port in use, unreadable data), or could not save
          64   the command line or the fault plan was wrong

        """

    /// The options `arguments` (without the program name) ask for; nil when they ask for help.
    public static func parse(_ arguments: [String]) throws(EmulatorUsageError) -> EmulatorOptions? {
        var options = EmulatorOptions()
        var rest = arguments[...]
        func value(_ name: String, inline: String?) throws(EmulatorUsageError) -> String {
            if let inline { return inline }
            guard let next = rest.popFirst(), !next.hasPrefix("--") else {
                throw EmulatorUsageError(message: "\(name) needs a value")
            }
            return next
        }
        while let argument = rest.popFirst() {
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            let inline = parts.count > 1 ? parts[1] : nil
            switch name {
            case "-h", "--help": return nil
            case "--drive", "--cloudkit", "--tls":
                guard inline == nil else { throw EmulatorUsageError(message: "\(name) takes no value") }
                switch name {
                case "--drive": options.drive = true
                case "--cloudkit": options.cloudkit = true
                default: options.tls = true
                }
            case "--port":
                let text = try value(name, inline: inline)
                guard let port = UInt16(text) else {
                    throw EmulatorUsageError(message: "--port needs a port number from 0 to 65535; found '\(text)'")
                }
                options.port = port
            case "--data": options.dataDirectory = try value(name, inline: inline)
            case "--faults": options.faultsFile = try value(name, inline: inline)
            case "--drive-name-order":
                let text = try value(name, inline: inline)
                guard let order = DriveFilesEmulator.NameOrder(rawValue: text) else {
                    let known = DriveFilesEmulator.NameOrder.allCases.map(\.rawValue).joined(separator: ", ")
                    throw EmulatorUsageError(message: "--drive-name-order is one of \(known); found '\(text)'")
                }
                options.driveNameOrder = order
            case "--cloudkit-reading": try options.cloudKit.setReading(try value(name, inline: inline))
            default:
                throw EmulatorUsageError(
                    message: argument.hasPrefix("-")
                        ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
            }
        }
        if !options.drive && !options.cloudkit {
            options.drive = true
            options.cloudkit = true
        }
        return options
    }

    /// Starts what `options` ask for; the caller stops it.
    ///
    /// Throws ``EmulatorUsageError`` for a fault plan that cannot be read, ``EmulatorError`` for anything else.
    public static func start(_ options: EmulatorOptions, clock: any StoreClock = SystemClock()) throws
        -> EmulatorServer
    {
        var plan = HTTPFaultPlan()
        if let file = options.faultsFile {
            do throws(EmulatorError) {
                plan = try FaultPlanFile.load(path: file)
            } catch {
                throw EmulatorUsageError(message: error.message)
            }
        }
        var services: [any EmulatorService] = []
        if options.drive {
            let oauth = GoogleOAuthEmulator(clock: clock)
            services.append(
                DriveEmulator(
                    oauth: oauth,
                    files: DriveFilesEmulator(
                        oauth: oauth, configuration: .init(nameOrder: options.driveNameOrder), clock: clock),
                    printsDemoRefreshToken: true))
        }
        if options.cloudkit {
            let cloudKit = CloudKitEmulator(webAuth: CloudKitWebAuthEmulator(clock: clock), clock: clock)
            cloudKit.database.configure { $0 = options.cloudKit }
            services.append(cloudKit)
        }
        return try EmulatorServer(
            services: services, port: options.port, dataDirectory: options.dataDirectory, faultPlan: plan,
            tls: options.tls)
    }

    /// Runs the command with `arguments` (without the program name) and exits: serves until SIGINT or SIGTERM.
    public static func main(_ arguments: [String]) -> Never {
        // SIGINT and SIGTERM stay pending, blocked in every thread (each inherits this mask), until the main thread
        // takes them with `sigwait` once the emulator serves: a Dispatch signal source registers asynchronously, and
        // a signal sent right after the start line, before it had, was ignored, leaving the emulator serving forever.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        let options: EmulatorOptions
        do {
            guard let parsed = try parse(arguments) else {
                write(help, to: .standardOutput)
                exit(0)
            }
            options = parsed
        } catch {
            write("Error: \(error.message)\nUsage: \(usage)\n  See 'cloudsync-emulator --help'.\n", to: .standardError)
            exit(64)
        }
        let emulator: EmulatorServer
        do {
            emulator = try start(options)
        } catch let error as EmulatorUsageError {
            write("Error: \(error.message)\n", to: .standardError)
            exit(64)
        } catch {
            write("Error: \(error)\n", to: .standardError)
            exit(1)
        }
        write(emulator.startLine + "\n", to: .standardOutput)
        let names = emulator.services.map(\.name).joined(separator: " and ")
        write(
            "cloudsync-emulator: serving \(names) on \(emulator.baseURL.absoluteString)"
                + (emulator.dataDirectory.map { ", state in \($0)" } ?? ", state in memory")
                + (emulator.caFile.map { ", CA certificate in \($0)" } ?? "")
                + "; stop with Ctrl-C\n", to: .standardError)
        // The main thread waits for the signal itself (nothing here runs on the main queue): `dispatchMain()` would
        // wait in `sigsuspend` with every signal open, and a stop signal would end the process at once.
        var received: Int32 = 0
        sigwait(&stopSignals, &received)
        do {
            try emulator.stop()
        } catch {
            write("Error: \(error)\n", to: .standardError)
            exit(1)
        }
        let saved = emulator.dataDirectory.map { "; state saved in \($0)" } ?? ""
        write("cloudsync-emulator: stopped\(saved)\n", to: .standardError)
        exit(0)
    }

    private static func write(_ text: String, to handle: FileHandle) {
        handle.write(Data(text.utf8))
    }
}
