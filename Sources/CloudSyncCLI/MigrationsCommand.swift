import CloudSync
import CloudSyncPipeline
import CloudSyncRunner
import Foundation

extension Commands {
    static let migrationID = ArgumentSpec(name: "ID", help: "The migration's id, as the file declares it.")

    static let migrationsInfo = CommandSpec(
        path: ["migrations", "info"],
        abstract: "List the file's migrations: applied, pending, stopped partway, or edited since applied.",
        discussion: """
            Reads the pipeline's state without taking its lock. Each migration's line gives where it stands, its \
            checksum (of what its steps do; not of the YAML's layout, comments or description), and who applied it, \
            when and in which run. A run applies the pending ones in file order before any job, and refuses to \
            start while one is edited since it was applied.
            """,
        arguments: [file], options: [json],
        exitCodes: [
            (.success, "the migrations were listed"),
            (.failure, "a migration was edited since it was applied, or one stopped partway"),
            (.jobError, "the pipeline's state could not be read"),
            (.usage, "the command line or the pipeline file was wrong"),
        ])

    static let migrationsRepair = CommandSpec(
        path: ["migrations", "repair"],
        abstract: "Accept, after review, an applied migration's edited steps or a stopped step's changed keys.",
        discussion: """
            For a migration whose steps were edited after it was applied: records the checksum they now give, once \
            you have checked that the store is as the edited steps would leave it (or that the edit changes \
            nothing it did); the state keeps the checksum it replaced. For a migration stopped in a step whose \
            plan a run could not finish because keys changed since the plan (each named in that run's report): \
            records the step applied, leaving those keys as they are, so the next run goes on with the next step. \
            Nothing is written to any provider.
            """,
        arguments: [file, migrationID],
        exitCodes: [
            (.success, "the new checksum was recorded"),
            (.jobError, "there was nothing to repair, or the state could not be changed"),
            (.usage, "the command line or the pipeline file was wrong"),
            (.locked, "a run of the pipeline holds its lock"),
        ])

    static let migrationsUndo = CommandSpec(
        path: ["migrations", "undo"],
        abstract: "Restore the keys a migration touched from the backup taken before it, and mark it pending.",
        discussion: """
            For a migration that names a backup (`before: { backup: { to, codec } }`) and is the last one applied \
            or begun. Reads the plans its steps were applied from (kept in the state directory) for the keys it \
            wrote or renamed away in its provider; each gets back the value the snapshot taken before the \
            migration holds, and each the snapshot lacks (a key the migration made) is removed. No other key is \
            touched. The state then forgets the migration, so the next run applies it again unless it is removed \
            from the file. The report and exit status are a run's.
            """,
        arguments: [file, migrationID], options: [json, runReport, runQuiet],
        exitCodes: [
            (.success, "the migration's keys were restored and it is pending again"),
            (.failure, "some keys could not be restored (each is named); the migration stays recorded"),
            (
                .jobError,
                "it cannot be undone (no backup, a later migration applied, its plans gone), or a provider "
                    + "could not be opened"
            ),
            (.usage, "the command line or the pipeline file was wrong, or the file declares no such migration"),
            (.locked, "a run of the pipeline holds its lock"),
        ])

    static let migrations = CommandSpec(
        path: ["migrations"], abstract: "Show, repair or undo the numbered migrations a pipeline applied.",
        exitCodes: [(.usage, "no subcommand, or an unknown one")],
        subcommands: [migrationsInfo, migrationsRepair, migrationsUndo])
}

/// `cloudsync migrations info FILE [--json]` (as `flyway info`) and `cloudsync migrations repair FILE ID`.
extension CommandLineTool {
    func migrationsInfo(_ parsed: ParsedArguments) -> ExitCode {
        guard let compiled = compile(parsed.argument(Commands.file) ?? "", unsetVariables: .deferred) else {
            return .usage
        }
        let ledger: MigrationLedger
        do throws(CloudSyncError) {
            ledger = try PipelineMigrations.ledger(of: compiled)
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return .jobError
        }
        let lines = ledger.lines
        if parsed.flag(Commands.json) {
            standardOutput(encoded(lines))
        } else if lines.isEmpty {
            standardError("\(compiled.spec.file) declares no migrations\n")
        } else {
            standardOutput(Self.migrationTable(lines))
        }
        return lines.contains { $0.standing == .changed || $0.standing == .failed } ? .failure : .success
    }

    func migrationsRepair(_ parsed: ParsedArguments) -> ExitCode {
        let id = parsed.argument(Commands.migrationID) ?? ""
        guard let compiled = compile(parsed.argument(Commands.file) ?? "", unsetVariables: .deferred) else {
            return .usage
        }
        do throws(CloudSyncError) {
            standardOutput(try PipelineMigrations.repair(id, of: compiled) + "\n")
            return .success
        } catch {
            standardError("Error: \(error.code): \(error.message)\n")
            return error.code == .locked ? .locked : .jobError
        }
    }

    func migrationsUndo(_ parsed: ParsedArguments) async -> ExitCode {
        let id = parsed.argument(Commands.migrationID) ?? ""
        guard let compiled = compile(parsed.argument(Commands.file) ?? "") else { return .usage }
        do throws(CloudSyncError) {
            _ = try compiled.spec.migration(id)
        } catch {
            return usageError(error.message, Commands.migrationsUndo)
        }
        var options = RunOptions()
        options.undoMigration = id
        return await runWithoutProgress(compiled, options, parsed)
    }

    /// One line per migration: id, standing, steps applied, who and when, then its description or error.
    static func migrationTable(_ lines: [MigrationLedger.Line]) -> String {
        let width = lines.map(\.id.count).max() ?? 0
        var text = ""
        for line in lines {
            var row = line.id.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
            row += line.standing.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)
            row += "  \(line.stepsApplied)/\(line.steps) steps"
            if let at = line.appliedAt {
                row += "  \(at)"
            } else if let run = line.runId {
                row += "  stopped in run \(run)"
            }
            if let by = line.appliedBy { row += "  \(by)" }
            if let description = line.description { row += "  \(description)" }
            text += row + "\n"
            if let recorded = line.recordedChecksum {
                text += "    edited since: recorded checksum \(recorded), the file gives \(line.checksum)\n"
            }
            if let error = line.error, line.standing == .failed { text += "    \(error)\n" }
        }
        return text
    }
}
