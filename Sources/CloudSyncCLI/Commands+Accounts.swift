/// The commands that sign providers in and keep their accounts: login, logout, accounts, and CloudKit's container
/// and zone checks.
extension Commands {
    static let login = CommandSpec(
        path: ["login"],
        abstract: "Sign a provider in once, in a browser, and keep the credentials in the pipeline's state database.",
        discussion: """
            Runs the provider type's sign-in (Google: OAuth 2.0 with PKCE and a redirect to 127.0.0.1; CloudKit: \
            the Apple ID sign-in, its web auth token delivered to a loopback callback or pasted). It prints the \
            address to open on standard error and opens nothing itself. What it yields (a refresh token, a web auth \
            token) goes to <state>/state.db (mode 0600), encrypted with the pipeline's codec when it has one, where \
            the provider finds it on every later run; it is never printed.

            With --account NAME (or when the provider says account: NAME) it goes to the accounts file instead, \
            where every pipeline whose provider says account: NAME finds it: one sign-in per account, not per \
            pipeline. Each pipeline still checks, on every run, that the account is the one it saw last.
            """,
        arguments: [file],
        options: [
            loginProvider,
            loginAccount,
            loginNoBrowser,
        ],
        exitCodes: [
            (.success, "signed in; the credentials are in the state database"),
            (.failure, "the sign-in failed, was refused or timed out; nothing was stored"),
            (.jobError, "the credentials could not be stored: the state directory could not be written"),
            (.usage, "an unknown provider, one that needs no sign-in, or a wrong command line or pipeline file"),
            (.locked, "a run of the pipeline is in progress; sign in when it has finished"),
        ])

    static let logout = CommandSpec(
        path: ["logout"], abstract: "Forget the credentials `login` kept for a provider.",
        arguments: [file],
        options: [
            logoutProvider
        ],
        exitCodes: [
            (.success, "the credentials were forgotten (or none were kept)"),
            (.jobError, "the pipeline's state could not be changed"),
            (.usage, "an unknown provider, one that needs no sign-in, or a wrong command line or pipeline file"),
            (.locked, "a run of the pipeline is in progress"),
        ])

    static let cloudkitProvider = OptionSpec.option(
        "provider", value: "ID", required: true, completes: .providers,
        help: "The cloudKit provider, by its id in the pipeline file.")

    static let cloudkitExitCodes: [(ExitCode, String)] = [
        (.success, "done; what CloudKit answered is printed"),
        (.failure, "CloudKit refused or could not be reached; the error names its CK_ code"),
        (.jobError, "the pipeline's state could not be opened"),
        (.usage, "an unknown provider, one that is not cloudKit, or a wrong command line or pipeline file"),
        (.locked, "a run of the pipeline is in progress"),
    ]

    static let cloudkitStatus = CommandSpec(
        path: ["cloudkit", "status"],
        abstract: "Show the CloudKit account status, the signed-in user record name and whether the zone exists.",
        arguments: [file], options: [cloudkitProvider, json], exitCodes: cloudkitExitCodes)

    static let cloudkitEnsureZone = CommandSpec(
        path: ["cloudkit", "ensure-zone"], abstract: "Create the provider's custom zone, or confirm it exists.",
        arguments: [file], options: [cloudkitProvider], exitCodes: cloudkitExitCodes)

    static let cloudkitChanges = CommandSpec(
        path: ["cloudkit", "changes"],
        abstract: "Print the zone's records changed since a sync token as JSON lines, and the new token last.",
        discussion: """
            Follows moreComing to the end. Each changed record is one line {"record": {...}} with its typed fields,             each deletion {"deleted": NAME}, and the last line {"syncToken": TOKEN}; pass that to --since next time.             Without --json the same appears as text.
            """,
        arguments: [file],
        options: [
            cloudkitProvider,
            cloudkitSince,
            json,
        ],
        exitCodes: cloudkitExitCodes)

    static let cloudkitDeleteZone = CommandSpec(
        path: ["cloudkit", "delete-zone"],
        abstract: "Delete the provider's custom zone and every record in it (development tooling).",
        arguments: [file], options: [cloudkitProvider, cloudkitDeleteYes],
        exitCodes: cloudkitExitCodes)

    static let cloudkit = CommandSpec(
        path: ["cloudkit"], abstract: "Inspect and set up a cloudKit provider's container and zone.",
        exitCodes: [(.usage, "no subcommand, or an unknown one")],
        subcommands: [cloudkitStatus, cloudkitEnsureZone, cloudkitChanges, cloudkitDeleteZone])

    static let accountsList = CommandSpec(
        path: ["accounts", "list"], abstract: "List the named accounts login --account kept (never a credential).",
        discussion: """
            One line each: the name, the provider type it was signed in for, what is kept, and when it last \
            changed (a sign-in, or a rotated token). The accounts file is CLOUDSYNC_ACCOUNTS_DIR/accounts.db, else \
            $XDG_STATE_HOME/cloudsync/accounts.db, else ~/.local/state/cloudsync/accounts.db.
            """,
        options: [json],
        exitCodes: [
            (.success, "the accounts were listed (none when nothing was signed in)"),
            (.jobError, "the accounts file could not be read"),
            (.usage, commandLineWrong),
        ])

    static let accountsRemove = CommandSpec(
        path: ["accounts", "remove"], abstract: "Forget a named account's credentials, for every pipeline using it.",
        arguments: [accountName],
        exitCodes: [
            (.success, "the account was forgotten, or was not kept"),
            (.jobError, "the accounts file could not be written"),
            (.usage, commandLineWrong),
        ])

    static let accounts = CommandSpec(
        path: ["accounts"], abstract: "List or forget the named accounts pipelines sign in with.",
        exitCodes: [(.usage, "no subcommand, or an unknown one")],
        subcommands: [accountsList, accountsRemove])
}
