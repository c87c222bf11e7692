import CloudSync

/// A pipeline file `cloudsync init` can write: commented, and either running as it is or, where it needs an account,
/// loading cleanly once the variables its header names are set (InitCommandTests checks each one both ways).
struct PipelineTemplate: Sendable {
    /// What `--template` takes.
    let name: String
    /// What it does, for `init --help`.
    let summary: String
    /// Whether it reads a key file beside the pipeline file, which `init` makes when there is none.
    let usesKeyFile: Bool
    /// What to do next, for the message after writing: given the pipeline file as a shell word.
    let next: @Sendable (String) -> String
    /// The file's text.
    let text: @Sendable (TemplateValues) -> String

    /// A template; `next` defaults to running the file, for a template that runs as it is.
    init(
        name: String, summary: String, usesKeyFile: Bool,
        next: @escaping @Sendable (String) -> String = { "next: cloudsync run \($0)" },
        text: @escaping @Sendable (TemplateValues) -> String
    ) {
        self.name = name
        self.summary = summary
        self.usesKeyFile = usesKeyFile
        self.next = next
        self.text = text
    }
}

/// What a template's text is made from.
struct TemplateValues: Sendable {
    /// The pipeline's `name:`, ASCII letters, digits, `.`, `_` and `-` only, so it is safe in paths and plain YAML.
    let name: String
    /// The pipeline file as the header's commands name it: its last path component, quoted for a shell if needed.
    let file: String
    /// The key file, relative to the pipeline file: `<name>.key`.
    var keyFile: String { name + ".key" }
    /// What the schema comment names: the installed schema's path, or nil when none was found beside the executable.
    let installedSchema: String?

    /// `name` as a YAML scalar: plain, unless plain YAML would read it as something other than text.
    var yamlName: String {
        let special = ["null", "true", "false", "yes", "no", "on", "off", "y", "n"]
        guard let first = name.first, first.isLetter, !special.contains(name.lowercased()) else {
            return "\"\(name)\""
        }
        return name
    }

    /// The first lines of every template: the schema comment editors read, and the line saying who wrote the file.
    func header(_ template: String, _ title: String) -> String {
        var text: String
        if let installedSchema {
            text = "# yaml-language-server: $schema=\(installedSchema)\n"
        } else {
            text = """
                # yaml-language-server: $schema=pipeline.schema.json
                # Editors complete and explain every field from that schema; write it beside this file with
                # `cloudsync schema pipeline > pipeline.schema.json`.

                """
        }
        text += "# \(name): \(title)\n"
        text += "# Written by `cloudsync init --template \(template)` (cloudsync \(CloudSyncVersion.current)).\n"
        return text
    }
}

/// Every template `cloudsync init` offers, in the order its help lists them.
enum PipelineTemplates {
    static let all = [starter, encryptedBackup, s3Backup, driveToCloudKit]

    static func named(_ name: String) -> PipelineTemplate? { all.first { $0.name == name } }

    /// The memory provider holding the keys the `sample-keys` job copies, as an entry under `providers:`.
    static let samplesProvider = """
          samples:
            type: memory
            items:
              settings.theme: dark
              settings.language: en
              notes.welcome: Hello from cloudsync. Edit me, or delete me and the sample-keys job.
        """

    /// The default: two local copies kept equal, with sample keys so the first run does something.
    static let starter = PipelineTemplate(
        name: "starter",
        summary: """
            a SQLite database and a directory backup kept equal by a sync, a quota audit, and a job putting three \
            sample keys in so the first run has something to show. Runs as it is.
            """,
        usesKeyFile: false,
        text: { values in
            let name = values.name
            let file = values.file
            return values.header("starter", "a starter pipeline; it runs as it is.") + """
                #
                # What it does: keeps one set of keys in two local copies, a SQLite database and a directory holding
                # one file per key (both under data/\(name)/ beside this file), and reports the space they use. Its
                # first job puts three sample keys in, so the first run has something to show.
                #
                # Run it:        cloudsync run \(file)
                #                Each job's result goes to standard error, the JSON report to
                #                .cloudsync/\(name)/reports/. Exit status 0: every job succeeded; 1: a job failed;
                #                2: a job could not run; 3: writes wait in the outbox for a provider.
                # After an edit: cloudsync validate \(file)   (every error, with its line and column)
                #                cloudsync plan \(file)       (what the file compiles to; opens nothing)
                # What to edit:  point `primary` at your own database (or keep it and write your keys into it),
                #                delete the `sample-keys` job and the `samples` provider, and move `backup` to
                #                another disk. Relative paths are relative to this file. The run keeps its state
                #                (lock, history, outbox, sync snapshot) in .cloudsync/\(name)/ beside it.
                # Every field:   man 5 cloudsync-pipeline (or cloudsync man pipeline | man -l -);
                #                docs/pipeline-reference.md of the documentation.
                version: 1
                # Names the state directory and the reports: ASCII letters, digits, '.', '_' and '-'.
                name: \(values.yamlName)
                # For `cloudsync serve`, which runs pipelines on their schedules (systemd timers and cron ignore it):
                # schedule: { cron: "30 2 * * *", timezone: Europe/Paris }
                providers:
                  # The embedded database, one SQLite file. `create: true` makes it on the first run; without it a
                  # missing file is an error, so a mistyped path or an unmounted disk is noticed.
                  primary: { type: sqlite, path: data/\(name)/primary.db, create: true }
                  # A second copy, one file per key, readable by any tool. Once it is on a disk of its own, drop
                  # `create: true`: a disk that is not mounted is then an error rather than filled underneath.
                  backup: { type: directory, path: data/\(name)/backup, create: true }
                  # Keys held in memory while a run lasts, for the `sample-keys` job to copy. It is not in the
                  # store, so only a job naming it reads it.
                \(PipelineTemplates.samplesProvider)
                store:
                  # What the store reads and writes, in order of preference: a read takes the first that has the key.
                  providers: [primary, backup]
                  # mirror: every write goes to both (the default, failover, writes to the first that takes it).
                  writeMode: mirror
                jobs:
                  # Copies the samples into the database, only the keys it lacks (ifMissing): your edits stay.
                  - { type: migrate, name: sample-keys, from: samples, to: primary, overwrite: ifMissing }
                  # Makes both copies hold the same keys and values. A key deleted on one side since the last sync
                  # is deleted on the other, but if that is more than maxDeletes of the keys, nothing is deleted and
                  # the job fails until you look (`cloudsync run --force` then lets it through once).
                  - { type: sync, name: reconcile, maxDeletes: "50%" }
                  # Each provider's used and total space, warning above 90% (add failOnWarning: true to fail).
                  - { type: quota, name: space, warnAbove: 0.9 }
                report:
                  # Keep the newest 30 reports (a month of nightly runs); older ones are deleted after each run.
                  keep: 30

                """
        })

    /// Snapshots of a SQLite database in an encrypted repository in a directory.
    static let encryptedBackup = PipelineTemplate(
        name: "encrypted-backup",
        summary: """
            snapshots of a SQLite database in an encrypted, deduplicated backup repository kept in a directory, \
            thinned by keep rules and verified; its key is NAME.key beside the file. Runs as it is.
            """,
        usesKeyFile: true,
        text: { values in
            let name = values.name
            let file = values.file
            return values.header("encrypted-backup", "an encrypted backup; it runs as it is.") + """
                #
                # What it does: each run takes one snapshot of a SQLite database (data/\(name)/app.db) into a backup
                # repository in backups/\(name)/: deduplicated (a value the repository holds is not stored again)
                # and encrypted (key names and values appear only sealed). Then it forgets the snapshots its keep
                # rules do not keep, deletes the data no kept snapshot needs, and checks the repository is whole.
                # Its first job puts three sample keys in the database, so the first run has something to back up.
                #
                # The key is \(values.keyFile), beside this file: 32 random bytes, mode 0600, made by `cloudsync init`
                # when it was not there. Keep a copy somewhere else (a password manager, another disk): without it
                # no snapshot can be read, and with it and the repository anyone can read them all.
                #
                # Run it:        cloudsync run \(file)
                #                Each job's result goes to standard error, the JSON report to
                #                .cloudsync/\(name)/reports/. Exit status 0: every job succeeded; 1: a job failed;
                #                2: a job could not run.
                # Snapshots:     cloudsync snapshots \(file) --repository repository
                # Restore:       declare a provider to restore into, such as
                #                  restored: { type: sqlite, path: data/\(name)/restored.db, create: true }
                #                add the job
                #                  - { type: restore, name: restore, from: repository, to: restored, codec: vault }
                #                and run it alone: cloudsync run \(file) --job restore
                #                (a plain `cloudsync run` runs every job: remove it again afterwards).
                # After an edit: cloudsync validate \(file)
                # What to edit:  point `app` at the database to back up, with `readOnly: true` instead of
                #                `create: true` (a backup never writes its source), delete the `sample-keys` job
                #                and the `samples` provider, and move `repository` to another disk. Relative paths
                #                are relative to this file; the run's state is kept in .cloudsync/\(name)/.
                # Every field:   man 5 cloudsync-pipeline (or cloudsync man pipeline | man -l -);
                #                docs/pipeline-reference.md of the documentation.
                \(Self.backupHead(name: name, yamlName: values.yamlName))
                  # Where the repository is kept (its format: docs/backup-format.md). Once it is on a disk of its
                  # own, drop `create: true`: a disk that is not mounted is then an error rather than filled underneath.
                  repository: { type: directory, path: backups/\(name), create: true }
                \(Self.backupJobs(repository: "repository", remote: false, name: name, keyFile: values.keyFile))

                """
        })

    /// The encrypted backup into an S3 bucket named by environment variables.
    static let s3Backup = PipelineTemplate(
        name: "s3-backup",
        summary: """
            the same encrypted backup into an S3 bucket (AWS or any S3-compatible server): the bucket, endpoint and \
            credentials come from environment variables its header names, and it runs once they are set.
            """,
        usesKeyFile: true,
        next: {
            "next: set CLOUDSYNC_S3_BUCKET, CLOUDSYNC_S3_ENDPOINT and the credentials (its header says how), then: "
                + "cloudsync validate \($0) && cloudsync run \($0)"
        },
        text: { values in
            let name = values.name
            let file = values.file
            return values.header("s3-backup", "an encrypted backup to an S3 bucket.") + """
                #
                # What it does: each run takes one snapshot of a SQLite database (data/\(name)/app.db) into a backup
                # repository in an S3 bucket (AWS, or an S3-compatible server: MinIO, Ceph, Cloudflare R2, ...):
                # deduplicated (a value the repository holds is not uploaded again) and encrypted before it leaves
                # this machine (key names and values appear only sealed). Then it forgets the snapshots its keep
                # rules do not keep, deletes the data no kept snapshot needs, and checks the repository is whole.
                # Its first job puts three sample keys in the database, so the first run has something to back up.
                #
                # Before the first run, set these (in the shell; for a systemd unit, in Environment= or
                # EnvironmentFile= lines of a drop-in):
                #   CLOUDSYNC_S3_BUCKET    the bucket, which must exist (cloudsync never creates one)
                #   CLOUDSYNC_S3_ENDPOINT  the server: https://s3.eu-west-1.amazonaws.com for AWS (your bucket's
                #                          region), http://127.0.0.1:9000 for a local MinIO,
                #                          https://ACCOUNT_ID.r2.cloudflarestorage.com for R2
                #   CLOUDSYNC_S3_REGION    the region requests are signed for, if not us-east-1 (R2: auto)
                #   CLOUDSYNC_S3_PREFIX    where in the bucket the repository goes, if not cloudsync/\(name)/
                #   AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile of
                #   ~/.aws/credentials: found as the AWS CLI finds them. Never write credentials in this file.
                #
                # The key is \(values.keyFile), beside this file: 32 random bytes, mode 0600, made by `cloudsync init`
                # when it was not there. Keep a copy somewhere else (a password manager, another disk): without it
                # no snapshot can be read, and with it and the bucket anyone can read them all.
                #
                # Check it:      cloudsync validate \(file)   (names any variable not set)
                # Run it:        cloudsync run \(file)
                #                Each job's result goes to standard error, the JSON report to
                #                .cloudsync/\(name)/reports/. Exit status 0: every job succeeded; 1: a job failed;
                #                2: a job could not run (the bucket unreachable, the credentials refused).
                # Snapshots:     cloudsync snapshots \(file) --repository bucket
                # Restore:       declare a provider to restore into, such as
                #                  restored: { type: sqlite, path: data/\(name)/restored.db, create: true }
                #                add the job
                #                  - { type: restore, name: restore, from: bucket, to: restored, codec: vault }
                #                and run it alone: cloudsync run \(file) --job restore
                #                (a plain `cloudsync run` runs every job: remove it again afterwards).
                # What to edit:  point `app` at the database to back up, with `readOnly: true` instead of
                #                `create: true` (a backup never writes its source), and delete the `sample-keys`
                #                job and the `samples` provider. Relative paths are relative to this file; the
                #                run's state is kept in .cloudsync/\(name)/.
                # Every field:   man 5 cloudsync-pipeline (or cloudsync man pipeline | man -l -);
                #                docs/pipeline-reference.md and docs/provider-s3.md of the documentation.
                \(Self.backupHead(name: name, yamlName: values.yamlName))
                  # Where the repository is kept: one object per repository file under the prefix.
                  bucket:
                    type: s3
                    bucket: ${env:CLOUDSYNC_S3_BUCKET}
                    endpoint: ${env:CLOUDSYNC_S3_ENDPOINT}
                    region: ${env:CLOUDSYNC_S3_REGION:-us-east-1}
                    # Keeps this repository apart from anything else in the bucket.
                    prefix: ${env:CLOUDSYNC_S3_PREFIX:-cloudsync/\(name)/}
                    # Objects are addressed as ENDPOINT/BUCKET/KEY; add `pathStyle: false` for BUCKET.ENDPOINT/KEY.
                    # No accessKeyId or secretAccessKey here: the credentials come from the environment or ~/.aws.
                \(Self.backupJobs(repository: "bucket", remote: true, name: name, keyFile: values.keyFile))

                """
        })

    /// The start the two backup templates share: version, name, schedule hint, a state that follows systemd's state
    /// directory, and the database backed up.
    static func backupHead(name: String, yamlName: String) -> String {
        """
        version: 1
        # Names the state directory, the reports and the snapshots: ASCII letters, digits, '.', '_', '-'.
        name: \(yamlName)
        # For `cloudsync serve`, which runs pipelines on their schedules (systemd timers and cron ignore it):
        # schedule: { cron: "30 2 * * *", timezone: Europe/Paris }
        # Where runs keep their lock, history, reports and outbox: .cloudsync/\(name) beside this file, or under
        # the shipped systemd units (docs/scheduling.md) the service's state directory, the one place they
        # may write.
        state: ${env:STATE_DIRECTORY:-.cloudsync/\(name)}
        providers:
          # The database backed up. `create: true` makes it on the first run, for the samples; for your own
          # database write `readOnly: true` instead: nothing can write to it, and a missing file is an error.
          app: { type: sqlite, path: data/\(name)/app.db, create: true }
        """
    }

    /// The part the two backup templates share: the sample keys, the codec, the store, and the jobs that back up,
    /// forget and verify into `repository` (`remote` when it is across a network, which words two comments).
    static func backupJobs(repository: String, remote: Bool, name: String, keyFile: String) -> String {
        let (stored, read) = remote ? ("uploaded", "downloads") : ("stored", "reads")
        return """
              # Keys held in memory while a run lasts, for the `sample-keys` job to copy.
            \(samplesProvider)
            codecs:
              # The cipher sealing the repository (XChaCha20-Poly1305) and its key ring, current key first.
              vault:
                type: xchacha20poly1305
                keys:
                  # To change keys: make one (cloudsync keygen --out \(name)-2.key), list it first with a new id,
                  # and keep this one below it.
                  - { id: key1, file: \(keyFile) }
            store:
              # What the store reads and writes (every pipeline has one); the jobs below name their providers.
              providers: [app]
            jobs:
              # Copies the samples into the database, only the keys it lacks (ifMissing): your edits stay.
              - { type: migrate, name: sample-keys, from: samples, to: app, overwrite: ifMissing }
              # One snapshot of every key of `app`. Only values the repository lacks are \(stored).
              - { type: backup, name: backup, from: app, to: \(repository), codec: vault, tags: [scheduled] }
              # Keeps the last 7 snapshots, one a day for 14 days, one a week for 8 weeks and one a month for
              # 12 months (restic's meanings) and removes the others; prune then deletes the data none of the
              # kept ones needs. `needs` forgets nothing after a backup that did not succeed.
              - type: forget
                name: forget
                repository: \(repository)
                codec: vault
                keep: { last: 7, daily: 14, weekly: 8, monthly: 12 }
                prune: true
                needs: [backup]
              # Every index and snapshot opens and every object they name exists; readData also \(read) 5% of
              # the data, chosen at random each run, and checks each value's hash (all reads everything).
              - { type: verify, name: check, repository: \(repository), codec: vault, readData: "5%" }
            report:
              # Keep the newest 30 reports (a month of nightly runs); older ones are deleted after each run.
              keep: 30
            """
    }

    /// A move from a Google Drive app data folder into CloudKit, both signed in with `cloudsync login`.
    static let driveToCloudKit = PipelineTemplate(
        name: "drive-to-cloudkit",
        summary: """
            moves every key of a Google Drive app data folder into a CloudKit container's private database, each \
            removed from Drive once its copy landed; the OAuth client, container and API token come from \
            environment variables its header names, and both accounts sign in once with `cloudsync login`.
            """,
        usesKeyFile: false,
        next: {
            "next: set GDRIVE_CLIENT_ID, GDRIVE_CLIENT_SECRET, CK_CONTAINER and CK_API_TOKEN, sign in once with "
                + "cloudsync login \($0) --provider drive and cloudsync login \($0) --provider cloudkit, then: "
                + "cloudsync run --dry-run --report - \($0)"
        },
        text: { values in
            let name = values.name
            let file = values.file
            return values.header("drive-to-cloudkit", "a move from Google Drive to CloudKit.") + """
                #
                # What it does: copies every key of a Google account's Drive app data folder (the hidden folder
                # private to one OAuth client) to records in a CloudKit container's private database, then removes
                # from Drive each key whose copy landed with the same value. A key whose copy failed (CloudKit takes
                # values up to 900 KB, and key names of ASCII letters, digits, '.', '_' and '-') stays in Drive and
                # is named in the report; a run stopped halfway is finished by the next one. Drive takes no
                # conditional deletes, so a value the app writes to Drive between the move's check of a key and its
                # removal is removed too: retire the app's Drive writes before moving, which is why `validate` and
                # every run print one warning about it.
                #
                # Before the first run:
                # 1. Set these (in the shell; for a systemd unit, in Environment= or EnvironmentFile= lines of a
                #    drop-in):
                #      GDRIVE_CLIENT_ID      the OAuth client whose app data folder holds the keys (a Desktop app
                #                            client; its id ends in .apps.googleusercontent.com)
                #      GDRIVE_CLIENT_SECRET  that client's secret
                #      CK_CONTAINER          the CloudKit container, such as iCloud.com.example.app
                #      CK_API_TOKEN          an API token of that container, from CloudKit Dashboard
                # 2. Sign both accounts in, once; what they yield is kept in .cloudsync/\(name)/state.db (mode 0600)
                #    and used by every later run:
                #      cloudsync login \(file) --provider drive
                #      cloudsync login \(file) --provider cloudkit
                #    (add --no-browser on a machine without one).
                # 3. Look before moving anything:
                #      cloudsync validate \(file)                     (names any variable not set)
                #      cloudsync run --dry-run --report - \(file)     (what would move; writes nothing)
                #
                # Run it:        cloudsync run \(file)
                #                Each job's result goes to standard error, the JSON report to
                #                .cloudsync/\(name)/reports/. Exit status 0: every job succeeded; 1: keys failed
                #                (they stayed in Drive); 2: a provider could not be reached or is signed out.
                # What to edit:  `keys: "settings.*"` on the job moves only the keys matching the glob.
                # Every field:   man 5 cloudsync-pipeline (or cloudsync man pipeline | man -l -);
                #                docs/provider-google-drive.md and docs/provider-cloudkit.md of the documentation.
                version: 1
                # Names the state directory and the reports: ASCII letters, digits, '.', '_' and '-'.
                name: \(values.yamlName)
                providers:
                  # The source. No refreshToken here: `cloudsync login` keeps one in the state database.
                  drive:
                    type: googleDrive
                    clientId: ${env:GDRIVE_CLIENT_ID}
                    clientSecret: ${env:GDRIVE_CLIENT_SECRET}
                  # The destination: one record per key in the zone CloudSyncZone (created when missing). No
                  # webAuthToken here: `cloudsync login` keeps one in the state database.
                  cloudkit:
                    type: cloudKit
                    container: ${env:CK_CONTAINER}
                    # production needs the record type CloudSyncItem, with a STRING field `value`, deployed to the
                    # container's production schema; in development it is made when first written.
                    environment: production
                    apiToken: ${env:CK_API_TOKEN}
                store:
                  # Where the keys end up; Drive is not in the store, so only the job reads it.
                  providers: [cloudkit]
                jobs:
                  # Copies each key (skipping those CloudKit already holds with the same value), then removes it
                  # from Drive once CloudKit holds it; never a key written in Drive again after its copy.
                  - { type: move, name: drive-to-cloudkit, from: drive, to: cloudkit }
                report:
                  # Keep the newest 30 reports; older ones are deleted after each run.
                  keep: 30

                """
        })
}
