import CloudSyncPipeline
import CloudSyncRunner

/// Every subcommand of `cloudsync`: what it takes and what it can exit with.
///
/// Help, usage lines, parsing and the shell completions are all made from these, so they cannot disagree.
enum Commands {
    static let file = ArgumentSpec(name: "FILE", help: "The pipeline file.")
    static let json = OptionSpec.flag("json", help: "Print JSON on standard output instead of text.")

    static let commandLineWrong = "the command line was wrong; nothing was done"
    static let verbose = OptionSpec.flag(
        "verbose", short: "v",
        help: "Log each provider request on standard error: provider, method, path (credentials redacted), status, "
            + "duration and bytes.")

    // The options and arguments each subcommand takes, one constant each: the specs below list them, and the
    // handlers read what was given through the same constants (``ParsedArguments``), so no name is spelt twice.

    static let runJob = OptionSpec.option(
        "job", short: "j", value: "NAME", repeatable: true, completes: .jobs,
        help: "Run only this job and the jobs it needs; repeat for more (default: every job, in file order).")
    static let runNoNeeds = OptionSpec.flag(
        "no-needs", help: "With --job, run only the jobs named, not the jobs they need.")
    static let runDryRun = OptionSpec.flag(
        "dry-run", help: "Read everything, report what would change, write nothing but the report.")
    static let runReport = OptionSpec.option(
        "report", value: "PATH|-", help: "Write the report to PATH, or to standard output with -.")
    static let runYes = OptionSpec.flag(
        "yes", help: "Confirm destructive jobs (clear) that the file does not confirm itself.")
    static let runForce = OptionSpec.flag(
        "force",
        help: "Let sync and mirror jobs delete more keys than their maxDeletes allows, for this run only.")
    static let runReadUnchanged = OptionSpec.flag(
        "read-unchanged",
        help: "Let sync, mirror and migrate jobs read and decode what they compare whatever the version tags they "
            + "recorded say, for this run only (sync jobs as if each said readUnchanged: true): once after replacing a "
            + "codec's key or changing a resolver.")
    static let runJoin = OptionSpec.flag(
        "join",
        help: "Help the run under way (the one named by --run-id, when given) with its outbox drain and its sharded "
            + "jobs' ranges until it ends; never start one: with none under way, exit 0 saying there was nothing "
            + "to join. Needs the state in PostgreSQL.")
    static let runJoinWait = OptionSpec.option(
        "join-wait", value: "DURATION", default: "0",
        help: "With --join, wait this long (at most a day) for a run to start when none is under way: whole seconds, "
            + "or a duration as pipeline files write them (90, 90s, 5m, 1h30m).")
    static let runID = OptionSpec.option(
        "run-id", value: "ID",
        help: "Name the run (a scheduler's job id): runners given the same id join the one that started instead of "
            + "exiting 75, and an id whose run already finished (ok or queued) is not run again (exit 0).")
    static let runQuiet = OptionSpec.flag(
        "quiet", short: "q", help: "Print only a line per failed or errored job, and no progress.")
    static let runProgress = OptionSpec.option(
        "progress", value: "MODE", choices: ["auto", "always", "never"], default: "auto",
        help: "Show a progress line; auto shows it when standard error is a terminal.")
    static let serveFiles = ArgumentSpec(
        name: "FILE|DIR", repeating: true,
        help: "Pipeline files, or directories whose *.yaml and *.yml files are served.")
    static let serveListen = OptionSpec.option(
        "listen", value: "ADDRESS:PORT", default: "127.0.0.1:8484",
        help: "Where the HTTP endpoints listen: IPv4 (127.0.0.1:8484, 0.0.0.0:8484) or IPv6 in brackets "
            + "([::1]:8484, [::]:8484). Anything but a loopback address (127.x.x.x, ::1) needs --token-file.")
    static let serveTLSCertificate = OptionSpec.option(
        "tls-cert", value: "FILE",
        help: "Serve HTTPS with this PEM certificate (its chain after it); needs --tls-key.")
    static let serveTLSKey = OptionSpec.option(
        "tls-key", value: "FILE",
        help: "The PEM private key of --tls-cert; a file only its owner can read (mode 0600).")
    static let serveMaxConnections = OptionSpec.option(
        "max-connections", value: "N", default: "256",
        help: "Connections served at once; a request past them gets 503 and a Retry-After.")
    static let serveMaxPerClient = OptionSpec.option(
        "max-connections-per-client", value: "N", default: "64",
        help: "Connections one client address may hold at once; more are closed as they are accepted.")
    static let serveIdleTimeout = OptionSpec.option(
        "idle-timeout", value: "SECONDS", default: "30",
        help: "Close a connection that sends nothing for this long, in the middle of a request or answer.")
    static let serveHeadTimeout = OptionSpec.option(
        "head-timeout", value: "SECONDS", default: "10",
        help: "Close a connection that has not sent a whole request head this long after opening or after its last "
            + "answer, however it trickles the bytes (slow-header clients).")
    static let serveTokenFile = OptionSpec.option(
        "token-file", value: "PATH",
        help: "A file (mode 0600, at least 16 characters) whose secret every request but /healthz must carry, as "
            + "`Authorization: Bearer TOKEN` or as the password of HTTP Basic authentication; compared in constant "
            + "time. Required off loopback.")
    static let validateFiles = ArgumentSpec(name: "FILE", repeating: true, help: "The pipeline files to check.")
    static let schemaKind = ArgumentSpec(name: "KIND", choices: schemaKinds, help: "Which schema to print.")
    static let discardKey = OptionSpec.option(
        "key", value: "GLOB", repeatable: true, help: "Discard only writes whose key matches; repeat for more."
    )
    static let discardProvider = OptionSpec.option(
        "provider", value: "ID", completes: .providers, help: "Discard only writes waiting for this provider.")
    static let discardYes = OptionSpec.flag("yes", help: "Confirm: without it nothing is discarded.")
    static let historyLimit = OptionSpec.option("limit", value: "N", default: "20", help: "Show at most N runs.")
    static let loginProvider = OptionSpec.option(
        "provider", value: "ID", required: true, completes: .providers,
        help: "The provider to sign in, by its id in the pipeline file.")
    static let loginAccount = OptionSpec.option(
        "account", value: "NAME",
        help: "Keep the credentials as the named account, in the accounts file every pipeline can use "
            + "(CLOUDSYNC_ACCOUNTS_DIR, else $XDG_STATE_HOME/cloudsync, else ~/.local/state/cloudsync), instead of in "
            + "this pipeline's state; providers that say account: NAME then sign in with it. Default: the "
            + "provider's own account field, if it has one.")
    static let accountName = ArgumentSpec(name: "NAME", help: "The account, as login --account named it.")
    static let loginNoBrowser = OptionSpec.flag(
        "no-browser",
        help: "No browser here: open the address elsewhere, then paste back the address it led to.")
    static let logoutProvider = OptionSpec.option(
        "provider", value: "ID", required: true, completes: .providers,
        help: "The provider to sign out, by its id in the pipeline file.")
    static let cloudkitSince = OptionSpec.option(
        "since", value: "TOKEN", help: "Only changes after this sync token (default: everything).")
    static let cloudkitDeleteYes = OptionSpec.flag("yes", help: "Confirm: without it nothing is deleted.")
    static let keygenOut = OptionSpec.option(
        "out", value: "FILE", required: true, help: "Where to write the key; must not exist.")
    static let initFile = ArgumentSpec(
        name: "FILE", help: "The pipeline file to create; it must not exist. With - the template is printed instead.")
    static let initTemplate = OptionSpec.option(
        "template", value: "NAME", choices: PipelineTemplates.all.map(\.name), default: PipelineTemplates.starter.name,
        help: "The template to start from.")
    static let completionsShell = ArgumentSpec(name: "SHELL", choices: shells, help: "The shell to complete in.")
    static let helpSubcommand = ArgumentSpec(
        name: "SUBCOMMAND", repeating: true, optional: true, help: "The subcommand to describe.")

    static let initPipeline = CommandSpec(
        path: ["init"], abstract: "Write a commented starter pipeline file that runs as it is.",
        discussion: """
            Writes FILE from a template: a header saying what it does, how to run it and what to edit, a comment on \
            every field worth one, and `name:` taken from the file's name. FILE is created, never replaced, and \
            nothing else is written except, for the encrypted templates, the key file NAME.key beside it: made (32 \
            random bytes, mode 0600, as `keygen` makes it) when it does not exist, and used as it is when it does. \
            With - as FILE the template goes to standard output and no key file is made.

            \(PipelineTemplates.all.map { "\($0.name): \($0.summary)" }.joined(separator: "\n\n"))
            """,
        arguments: [initFile],
        options: [initTemplate],
        exitCodes: [
            (.success, "the file was written (and its key file, when it needs one and none was there)"),
            (.usage, "the command line was wrong (an unknown template); nothing was done"),
            (
                .cannotCreate,
                "FILE or its key file could not be created: FILE exists (init never overwrites a file), its directory "
                    + "is missing or not writable, or something that is not a key is where the key file goes"
            ),
        ])

    static let run = CommandSpec(
        path: ["run"], abstract: "Run a pipeline's jobs in order and write a JSON report.",
        discussion: """
            Takes the pipeline's lock, flushes its outbox, runs the jobs in file order (or those named with --job) and \
            writes the report to --report, else the file's report.path, else <state>/reports/. Each job's result goes \
            to standard error as it ends.
            """,
        arguments: [file],
        options: [
            runJob,
            runNoNeeds,
            runDryRun,
            runReport,
            runYes,
            runForce,
            runReadUnchanged,
            runJoin,
            runJoinWait,
            runID,
            runQuiet,
            runProgress,
            verbose,
        ],
        exitCodes: [
            (.success, "every job ran and succeeded"),
            (
                .failure,
                "a job finished with failed keys, a check found differences, a quota warning under failOnWarning, a "
                    + "sync or mirror stopped by maxDeletes, or a job was skipped because a job it needs did not end ok"
            ),
            (
                .jobError,
                "a job could not run (a provider it needs unavailable or signed out, a refused clear, unreadable state)"
            ),
            (.queued, "every job succeeded but writes wait in the outbox for a provider that could not take them"),
            (.usage, "the command line or the pipeline file was wrong; nothing was done"),
            (.locked, "another run of the same pipeline is in progress (without --join, or under another --run-id)"),
            (.interrupted, "interrupted (SIGINT or SIGTERM); the report says how far it got"),
        ])

    static let serve = CommandSpec(
        path: ["serve"],
        abstract: "Run pipelines on their schedules, with health, metrics, a JSON API and a status page.",
        discussion: """
            Runs every pipeline on its `schedule:` (at most one run of each at a time; a slot that comes while the \
            last run still runs is skipped and counted), each run as `cloudsync run` makes it (lock, report, \
            history), and flushes each outbox on its `store.outbox.autoFlush` timer between runs. HTTP: GET / (the \
            page), /healthz, /readyz, /metrics (Prometheus), /api/pipelines, /api/runs?pipeline=&limit=, \
            /api/runs/ID, and POST /api/pipelines/NAME/run. SIGHUP reloads the files (one that no longer loads keeps \
            its running version and is reported); SIGTERM or SIGINT starts no new run, lets running ones stop at \
            their next batch boundary with an interrupted report, and exits 0. The listener is libmicrohttpd: \
            a request head over 16 KiB gets 431, a body over 64 KiB 413 (before it is read), and the token is \
            checked as soon as a head arrives.
            """,
        arguments: [serveFiles],
        options: [
            serveListen, serveTokenFile, serveTLSCertificate, serveTLSKey, serveMaxConnections, serveMaxPerClient,
            serveIdleTimeout, serveHeadTimeout,
        ],
        exitCodes: [
            (.success, "stopped by SIGTERM or SIGINT"),
            (
                .usage,
                "a file did not load at start, or the command line was wrong (--listen off loopback without "
                    + "--token-file, a token or key file others can read, a certificate that does not load)"
            ),
            (.unavailable, "the --listen address could not be bound (in use, or not this machine's)"),
        ])

    static let validate = CommandSpec(
        path: ["validate"], abstract: "Check pipeline files; print every error with file:line:col.",
        discussion: """
            Prints a verdict per file on standard output (FILE: valid, or FILE: N errors) and each error with its \
            source line on standard error; with --json, one object per file on standard output.
            """,
        arguments: [validateFiles],
        options: [json],
        exitCodes: [
            (.success, "every file is valid"),
            (.usage, "a file has errors, or the command line was wrong"),
        ])

    static let plan = CommandSpec(
        path: ["plan"],
        abstract: """
            Show what a pipeline compiles to (providers, caps, key rules, codecs by key id, outbox limits, jobs), \
            without touching any provider; with --job and --out, save a migrate or move job's plan for apply.
            """,
        discussion: """
            With --out, reads both providers of the job (writing nothing) and saves every key's action (copy, \
            overwrite, unchanged, skip, fail), its destination name and the digests of the versions it saw, bound \
            to the pipeline file's digest; prints the counts and the first 20 keys of each action (--json: the plan's \
            lines, every key). `cloudsync apply PLAN` then does exactly that.
            """,
        arguments: [file], options: [json, planJob, planOut],
        exitCodes: [
            (.success, "the plan was printed (or saved)"),
            (.failure, "the plan was saved, and some of its keys would fail (each is named)"),
            (.jobError, "the plan could not be made: a provider could not be read"),
            (.usage, "the command line or the pipeline file was wrong"),
        ])

    static let schemaKinds = ["pipeline", "report"]

    static let schema = CommandSpec(
        path: ["schema"], abstract: "Print the JSON Schema of pipeline files or of run reports.",
        arguments: [schemaKind],
        exitCodes: [(.success, "the schema was printed"), (.usage, commandLineWrong)])

    static let outboxList = CommandSpec(
        path: ["outbox", "list"],
        abstract: "Show the writes waiting in a pipeline's outbox (never their values), oldest first.",
        discussion: """
            Opens the outbox read-only, so it works while a run holds the pipeline. Times are ISO 8601 in UTC.
            """,
        arguments: [file], options: [json],
        exitCodes: [
            (.success, "the entries were listed (an outbox that does not exist yet is empty)"),
            (.jobError, "the pipeline's state could not be read"),
            (.usage, "the command line or the pipeline file was wrong"),
        ])

    static let outboxFlush = CommandSpec(
        path: ["outbox", "flush"], abstract: "Retry the writes waiting in a pipeline's outbox now.",
        arguments: [file], options: [verbose],
        exitCodes: [
            (.success, "the outbox was flushed; what could not be written stays queued"),
            (.jobError, "the pipeline's state could not be opened, or the flush failed"),
            (.usage, "the command line or the pipeline file was wrong"),
            (.locked, "a run of the pipeline is in progress"),
        ])

    static let outboxDiscard = CommandSpec(
        path: ["outbox", "discard"], abstract: "Drop writes waiting in a pipeline's outbox for good.",
        discussion: """
            Selects every queued write, or those whose key matches a --key glob (* any run of characters, ? any \
            one) and that wait for --provider. Without --yes it only says what it would discard.
            """,
        arguments: [file],
        options: [
            discardKey,
            discardProvider,
            discardYes,
        ],
        exitCodes: [
            (.success, "the selected writes were discarded"),
            (.jobError, "the pipeline's state could not be opened"),
            (.usage, "--yes is missing (nothing was discarded), or the command line or pipeline file was wrong"),
            (.locked, "a run of the pipeline is in progress"),
        ])

    static let outbox = CommandSpec(
        path: ["outbox"], abstract: "Show, retry or drop the writes waiting in a pipeline's outbox.",
        exitCodes: [(.usage, "no subcommand, or an unknown one")],
        subcommands: [outboxList, outboxFlush, outboxDiscard])

    static let history = CommandSpec(
        path: ["history"], abstract: "List the pipeline's last runs, newest first.",
        arguments: [file],
        options: [historyLimit, json],
        exitCodes: [
            (.success, "the runs were listed (none when the pipeline has not run)"),
            (.jobError, "the pipeline's state could not be read"),
            (.usage, "the command line or the pipeline file was wrong"),
        ])

    static let keygen = CommandSpec(
        path: ["keygen"], abstract: "Write a new 32-byte key file (mode 0600; never overwrites).",
        options: [keygenOut],
        exitCodes: [
            (.success, "the key file was written"),
            (.usage, commandLineWrong),
            (.cannotCreate, "the key file could not be created: it already exists, or its directory is missing"),
        ])

    static let shells = ["bash", "zsh", "fish"]

    static let completions = CommandSpec(
        path: ["completions"], abstract: "Print a shell completion script for cloudsync.",
        discussion: """
            bash: source <(cloudsync completions bash), or save it as \
            /etc/bash_completion.d/cloudsync. zsh: save it as _cloudsync in a directory on $fpath. fish: save it as \
            ~/.config/fish/completions/cloudsync.fish. Job names (--job), provider ids (--provider, --repository) and \
            codec ids (--codec) complete from the pipeline file given on the line.
            """,
        arguments: [completionsShell],
        exitCodes: [(.success, "the script was printed"), (.usage, commandLineWrong)])

    static let manPage = ArgumentSpec(
        name: "PAGE", optional: true,
        help: "The page: cloudsync (the default), a subcommand (run, outbox-list, ...) or pipeline, the file format.")
    static let manOutput = OptionSpec.option(
        "output", value: "DIR",
        help: "Write every page, as DIR/man1/*.1 and DIR/man5/*.5 (replacing older copies), instead of printing one.")
    static let manDocumentation = OptionSpec.option(
        "doc-dir", value: "PATH", default: "/usr/local/share/doc/cloudsync",
        help: "Where the documentation is installed, as SEE ALSO names it.")

    static let man = CommandSpec(
        path: ["man"], abstract: "Print a manual page in roff, or write them all.",
        discussion: """
            The pages are cloudsync(1), one per subcommand (cloudsync-run(1), cloudsync-outbox-list(1), ...) and \
            cloudsync-pipeline(5) for the file format, made from the same descriptions as --help and the pipeline \
            schema. `make install` installs them; without them, read one with: cloudsync man run | man -l -
            """,
        arguments: [manPage], options: [manOutput, manDocumentation],
        exitCodes: [
            (.success, "the page was printed, or every page written"),
            (.usage, "no such page, or another mistake on the command line"),
            (.cannotCreate, "a page could not be written under --output"),
        ])

    static let version = CommandSpec(
        path: ["version"],
        abstract: "Print the version, what it was built from, and the system and C libraries it runs with.",
        discussion: """
            The first line is what --version prints (cloudsync VERSION); then one `- key: value` line each, as rclone \
            version prints them: commit (the git commit built, with -dirty when tracked files differed from it), \
            commitDate (that commit's date in UTC: the build's time is left out, so two builds of a commit are the \
            same bytes), swift (the compiler's version), os (os-release's PRETTY_NAME), kernel (uname's name, \
            release and machine), arch (what the binary was compiled for), and the versions of the C libraries as \
            the loaded copies report them: sqlite, libsodium, libyaml, libcurl, libcurlTLS (the TLS library \
            libcurl uses), libcrypto (OpenSSL), libpq and libmicrohttpd (`serve`'s listener).

            commit and commitDate come from `make release` (or `make install`) in a git checkout and are unknown in \
            a plain `swift build`, whose swift says only the major and minor version. With --json, one object with \
            version and these keys, sorted, every value a string.
            """,
        options: [json],
        exitCodes: [(.success, "the versions were printed"), (.usage, commandLineWrong)])

    static let help = CommandSpec(
        path: ["help"], abstract: "Show help for cloudsync or one of its subcommands.",
        arguments: [
            helpSubcommand
        ],
        exitCodes: [(.success, "the help was printed"), (.usage, "no such subcommand")])

    /// Every subcommand, in the order help lists them.
    static let all = [
        initPipeline, run, serve, validate, plan, apply, migrations, schema, outbox, history, snapshots, restore,
        forget, repair,
        unlock,
        login,
        logout,
        accounts, cloudkit, keygen, completions, man, version, help,
    ]

    /// The command that `words` name (`["outbox", "list"]`), or the error saying which word is unknown.
    static func find(_ words: [String]) throws(UsageError) -> CommandSpec {
        guard let first = words.first else { throw UsageError("no subcommand given") }
        guard var command = all.first(where: { $0.name == first }) else {
            throw unknownCommand(first, among: all.map(\.name))
        }
        for word in words.dropFirst() {
            guard let next = command.subcommand(word) else {
                throw unknownCommand(word, among: command.subcommands.compactMap(\.path.last), in: command)
            }
            command = next
        }
        return command
    }

    static func unknownCommand(_ word: String, among names: [String], in group: CommandSpec? = nil) -> UsageError {
        var message = "unknown \(group.map { $0.name + " subcommand" } ?? "command") '\(word)'"
        if let guess = closest(word, among: names) { message += "; did you mean '\(guess)'?" }
        return UsageError(message)
    }
}
