/// The commands that work on a backup repository: snapshots, restore, forget, repair and unlock.
extension Commands {
    static let snapshotsRepository = OptionSpec.option(
        "repository", value: "ID", required: true, completes: .providers,
        help: "The provider keeping the backup repository, by its id in the pipeline file.")
    static let snapshotsCodec = OptionSpec.option(
        "codec", value: "ID", completes: .codecs,
        help: "The codec whose key ring opens it (default: the file's only codec).")
    static let unlockRemoveAll = OptionSpec.flag(
        "remove-all", help: "Remove every lock, not only stale ones (with --yes).")
    static let repairYes = OptionSpec.flag("yes", help: "Confirm: without it nothing is removed.")
    static let unlockYes = OptionSpec.flag("yes", help: "Confirm --remove-all.")
    static let restoreSnapshot = OptionSpec.option(
        "snapshot", value: "SEL", default: "latest",
        help: "latest, a snapshot id or a unique prefix of one, or an ISO-8601 time.")
    static let restoreAt = OptionSpec.option(
        "at", value: "TIME",
        help:
            "The newest snapshot taken at or before TIME (ISO 8601, like 2026-12-05T02:30:00Z), instead of --snapshot.")
    static let restoreTo = OptionSpec.option(
        "to", value: "PROVIDER", completes: .providers, help: "Restore into this provider of the file, or store.")
    static let restoreTarget = OptionSpec.option(
        "target", value: "DIR", help: "Restore into this directory, one file per key (created if need be).")
    static let restoreKeys = OptionSpec.option(
        "keys", value: "GLOB", repeatable: true, help: "Restore only keys matching; repeat for more.")
    static let restoreOverwrite = OptionSpec.option(
        "overwrite", value: "MODE", help: "always (the default), ifMissing or ifDifferent.")

    static let forgetKeepLast = OptionSpec.option("keep-last", value: "N", help: "Keep the newest N snapshots.")
    static let forgetKeepHourly = OptionSpec.option(
        "keep-hourly", value: "N", help: "Keep the newest snapshot of each of the last N hours that have one.")
    static let forgetKeepDaily = OptionSpec.option(
        "keep-daily", value: "N", help: "Keep the newest snapshot of each of the last N days that have one.")
    static let forgetKeepWeekly = OptionSpec.option(
        "keep-weekly", value: "N", help: "Keep the newest snapshot of each of the last N weeks that have one.")
    static let forgetKeepMonthly = OptionSpec.option(
        "keep-monthly", value: "N", help: "Keep the newest snapshot of each of the last N months that have one.")
    static let forgetKeepYearly = OptionSpec.option(
        "keep-yearly", value: "N", help: "Keep the newest snapshot of each of the last N years that have one.")
    static let forgetKeepWithin = OptionSpec.option(
        "keep-within", value: "SPAN",
        help: "Keep every snapshot taken within SPAN before the newest (1y6m, 30d, 2w, 12h).")
    static let forgetTag = OptionSpec.option(
        "tag", value: "TAG", repeatable: true,
        help: "Consider only snapshots carrying this tag (repeat: every one); the others are kept.")
    static let forgetPrune = OptionSpec.flag(
        "prune", help: "Then delete the data no remaining snapshot needs, under the repository's exclusive lock.")
    static let forgetMaxUnused = OptionSpec.option(
        "max-unused", value: "P", default: "5%",
        help: "How much unneeded data a prune may leave in packs it keeps whole (0% rewrites every such pack).")

    static let forget = CommandSpec(
        path: ["forget"], abstract: "Remove backup snapshots outside a keep policy, without editing the pipeline file.",
        discussion: """
            Runs one forget job through the pipeline's state, codecs and run lock: of the snapshots of the \
            repository in --repository, each pipeline and source's group keeps what the --keep-* rules name \
            (restic's meanings; a snapshot any rule names is kept) and the rest are removed. At least one rule is \
            needed. --tag limits it to snapshots carrying the tag. --prune then deletes the data none of the kept \
            snapshots needs. --dry-run removes nothing: the report's keyLists name the snapshots it would remove and \
            keep, by id. The report and exit status are a run's.
            """,
        arguments: [file],
        options: [
            snapshotsRepository, snapshotsCodec, forgetKeepLast, forgetKeepHourly, forgetKeepDaily, forgetKeepWeekly,
            forgetKeepMonthly, forgetKeepYearly, forgetKeepWithin, forgetTag, forgetPrune, forgetMaxUnused,
            runDryRun, json, runReport, runQuiet,
        ],
        exitCodes: [
            (.success, "the snapshots outside the policy were removed (or, with --dry-run, named)"),
            (.jobError, "the forget could not run: the repository could not be opened, or a prune found damage"),
            (.usage, "no --keep-* rule, or the command line or the pipeline file was wrong"),
            (.locked, "a run of the pipeline, or another process using the repository, holds its lock"),
        ])

    static let snapshots = CommandSpec(
        path: ["snapshots"], abstract: "List the snapshots of a backup repository, oldest first.",
        discussion: """
            One line each: the id's first 8 characters (restore takes any unique prefix), time, host, pipeline, \
            source, key count, bytes of values and tags; --json prints every field with the whole id. Nothing is \
            written and the pipeline's run lock is not taken.
            """,
        arguments: [file],
        options: [snapshotsRepository, snapshotsCodec, json],
        exitCodes: [
            (.success, "the snapshots were listed (none when the repository holds none)"),
            (.failure, "some snapshot objects are damaged: each is named, and every other snapshot is listed"),
            (.jobError, "the repository could not be opened: missing, another key, damaged, or a newer format"),
            (.usage, "the command line or the pipeline file was wrong"),
        ])

    static let repairIndex = CommandSpec(
        path: ["repair", "index"], abstract: "Rebuild a backup repository's index from its packs.",
        discussion: """
            Reads every pack of the repository and writes a new index from what each pack's header says it holds; \
            a pack written before format 3 has no header, and what the readable old index said of it is kept. Then \
            the old index objects are deleted. Run it when a restore or a verify job says an index object is damaged \
            or missing. It holds the pipeline's run lock and the repository's exclusive lock, as a prune does; --json \
            prints what it did.
            """,
        arguments: [file],
        options: [snapshotsRepository, snapshotsCodec, json],
        exitCodes: [
            (.success, "the index was rebuilt (packs it could not describe are named on standard error)"),
            (.jobError, "the repository could not be opened or written"),
            (.usage, "the command line or the pipeline file was wrong"),
            (.locked, "a run of the pipeline, or another process using the repository, holds its lock"),
        ])

    static let unlock = CommandSpec(
        path: ["unlock"], abstract: "Remove a backup repository's stale locks.",
        discussion: """
            A lock is stale when its holder has not refreshed it for 15 minutes, or when it was written on this \
            machine by a process that no longer runs (a backup or prune that was killed). Every backup, restore, \
            verify and prune already passes over stale locks; unlock removes them, and names the live ones it kept. \
            --remove-all --yes removes every lock, for a holder you know is gone on another machine. It holds the \
            pipeline's run lock; --json prints the locks removed and kept.
            """,
        arguments: [file],
        options: [snapshotsRepository, snapshotsCodec, unlockRemoveAll, unlockYes, json],
        exitCodes: [
            (.success, "the stale locks (or, with --remove-all, every lock) were removed; live ones are named"),
            (.jobError, "the repository could not be opened or written"),
            (
                .usage,
                "--remove-all without --yes (nothing was removed), or the command line or pipeline file was wrong"
            ),
            (.locked, "a run of the pipeline is in progress"),
        ])

    static let restore = CommandSpec(
        path: ["restore"], abstract: "Restore a backup snapshot, without editing the pipeline file.",
        discussion: """
            Runs one restore job through the pipeline's state, codecs and run lock: the snapshot --snapshot names \
            (latest, an id or a unique prefix, or an ISO-8601 time; --at TIME says the time alone) from the \
            repository in --repository, into \
            --to (a provider of the file, or store) or --target (a directory, created if need be, which needs no \
            provider in the file). --keys restores only matching keys (* any run of characters, ? any one); \
            --overwrite ifMissing or ifDifferent leaves keys alone that way. Large and binary values are written \
            as files where the destination stores them. --dry-run reads everything and writes nothing; the report \
            and exit status are a run's.
            """,
        arguments: [file],
        options: [
            snapshotsRepository, snapshotsCodec, restoreSnapshot, restoreAt, restoreTo, restoreTarget, restoreKeys,
            restoreOverwrite, runDryRun, json, runReport, runQuiet,
        ],
        exitCodes: [
            (.success, "every key was restored"),
            (.failure, "some keys could not be restored (each is named in the report); the rest were"),
            (.jobError, "the restore could not run: no such snapshot, the repository could not be opened"),
            (.usage, "the command line or the pipeline file was wrong"),
            (.locked, "a run of the pipeline is in progress"),
        ])

    static let repairSnapshots = CommandSpec(
        path: ["repair", "snapshots"], abstract: "Remove a backup repository's snapshot objects that cannot be read.",
        discussion: """
            Names every snapshot object that does not open or parse (damaged, or sealed with another key). Such a \
            snapshot can never be restored, and it stops every prune, which cannot know what it needs. With --yes \
            they are removed; a prune then frees the data only they needed. It holds the pipeline's run lock and the \
            repository's exclusive lock; --json prints the objects.
            """,
        arguments: [file],
        options: [snapshotsRepository, snapshotsCodec, repairYes, json],
        exitCodes: [
            (.success, "no snapshot object is damaged, or --yes removed them"),
            (.jobError, "the repository could not be opened or written"),
            (
                .usage,
                "damaged objects were found and --yes is missing (nothing was removed), or the command line or pipeline file was wrong"
            ),
            (.locked, "a run of the pipeline, or another process using the repository, holds its lock"),
        ])

    static let repair = CommandSpec(
        path: ["repair"], abstract: "Repair a backup repository.",
        exitCodes: [(.usage, "no subcommand, or an unknown one")],
        subcommands: [repairIndex, repairSnapshots])
}
