import CloudSync
import CloudSyncLocal
import CloudSyncPipelineState
import CloudSyncSQLite
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncCLI

/// `cloudsync run`, end to end: the built binary on pipelines in a temporary directory, its reports read back and
/// checked against `schemas/report.schema.json`.
@Suite(.timeLimit(.minutes(10))) struct RunCommandTests {
    let executable: String
    let directory: TemporaryDirectory
    /// Reports read back for checking live apart from the pipelines' directory, which dry-run tests compare.
    let reports: TemporaryDirectory
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    init() async throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
        reports = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("keys"), withIntermediateDirectories: true)
        _ = try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("keys/vault.key")])
    }

    private func pipeline(_ name: String, _ body: String) throws -> String {
        let path = directory.file(name)
        try ("version: 1\nname: \(name.replacingOccurrences(of: ".yaml", with: ""))\n" + body)
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A pipeline whose memory provider `seed` starts with `keys` items, beside a directory provider `directory`
    /// that is the store.
    private func seededDirectoryPipeline(_ name: String, keys: Int, directory: String, jobs: [String]) throws -> String
    {
        let items = (0..<keys).map { "      k\($0): v\($0)\n" }.joined()
        return try pipeline(
            name + ".yaml",
            "providers:\n  seed:\n    type: memory\n    items:\n\(items)"
                + "  \(directory): { type: directory, path: data/\(directory), create: true }\n"
                + "store:\n  providers: [\(directory)]\njobs:\n" + jobs.map { "  - \($0)\n" }.joined())
    }

    private func run(_ arguments: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(executable, ["run"] + arguments)
    }

    /// The report a run printed with `--report -`, parsed, after checking it against the report schema.
    private func report(_ result: ProcessResult) async throws -> [String: Any] {
        let path = reports.file("report-\(UUID().uuidString).json")
        try result.standardOutput.write(toFile: path, atomically: true, encoding: .utf8)
        try await expectValidReport(path)
        return try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
    }

    private func expectValidReport(_ path: String) async throws {
        let python = root + "/.build/pyenv/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the tests' Python environment is missing: run `make test`")
            return
        }
        let check = try await ProcessRunner.run(
            python, [root + "/scripts/check_schema.py", root + "/schemas/report.schema.json", path])
        #expect(check.standardOutput.hasPrefix("PASS "), "\(check.standardOutput)")
    }

    private func job(_ report: [String: Any], _ index: Int) -> [String: Any] {
        ((report["jobs"] as? [[String: Any]]) ?? [])[index]
    }

    private func counts(_ report: [String: Any], _ index: Int) -> [String: Int] {
        job(report, index)["counts"] as? [String: Int] ?? [:]
    }

    static let seeded = """
        providers:
          seed:
            type: memory
            items:
              settings.theme: '{"theme":"dark","updatedAt":"2026-11-01T10:00:00Z"}'
              settings.font: '{"size":14,"updatedAt":1767225600000}'
              favourites: '[1,2,3]'
          primary: { type: sqlite, path: data/primary.db, create: true }
          backup: { type: directory, path: data/backup, codec: vault, create: true }
        codecs:
          vault:
            type: xchacha20poly1305
            keys: [{ id: k1, file: keys/vault.key }]
        store:
          providers: [primary, backup]
          writeMode: mirror
          resolver: { type: timestamp, field: updatedAt }

        """

    @Test func everyJobRunsAndReports() async throws {
        let file = try pipeline(
            "all.yaml",
            Self.seeded + """
                jobs:
                  - { type: migrate, name: load, from: seed, to: primary }
                  - { type: sync, name: reconcile }
                  - { type: quota, name: space, warnAbove: 0.99 }
                  - { type: verify, name: check, provider: backup }
                  - { type: rekey, name: rekey, provider: backup }
                  - { type: export, name: export, from: store, path: out/all.json, codec: vault }
                  - { type: clear, name: wipe, provider: primary, confirm: true }
                  - { type: import, name: restore, path: out/all.json, to: primary }
                  - { type: flush, name: flush }

                """)
        let result = try await run([file, "--report", "-", "--quiet"])
        #expect(result.status == 0, "\(result.standardError)")
        let parsed = try await report(result)
        #expect(parsed["status"] as? String == "ok")
        #expect(counts(parsed, 0)["copied"] == 3)
        #expect(
            counts(parsed, 1) == [
                "keys": 3, "inSync": 0, "repaired": 3, "skipped": 0, "failed": 0, "queued": 0, "deleted": 0,
                "conflicts": 0, "heldBack": 0, "changedSinceRead": 0,
            ])
        #expect(counts(parsed, 3).filter { $0.key != "bytesRead" } == ["checked": 3, "ok": 3, "failed": 0])
        #expect((counts(parsed, 3)["bytesRead"] ?? 0) > 0)
        #expect(counts(parsed, 4)["skipped"] == 3)  // already under the current key
        #expect(counts(parsed, 5)["items"] == 3)
        #expect(counts(parsed, 6)["removed"] == 3)
        #expect(counts(parsed, 7)["imported"] == 3)
        let exported = try String(contentsOfFile: directory.file("out/all.json"), encoding: .utf8)
        #expect(!exported.contains("dark"))
        // The first line names both what a restore needs: the pipeline's codec and the key id that encrypted it.
        let firstLine = String(exported.prefix { $0 != "\n" })
        let header = try #require(try JSONSerialization.jsonObject(with: Data(firstLine.utf8)) as? [String: Any])
        #expect(header["version"] as? Int == 3)
        #expect(header["codec"] as? String == "vault")
        #expect(header["keyId"] as? String == "k1")
        // The restore reproduced the key set exactly.
        let check = try await run([file, "--job", "check", "--report", "-", "--quiet"])
        await #expect(counts(try report(check), 0)["ok"] == 3)
        let providers = parsed["providers"] as? [[String: Any]] ?? []
        #expect(providers.map { $0["id"] as? String } == ["seed", "primary", "backup"])
        #expect(providers.allSatisfy { ($0["requests"] as? Int ?? 0) > 0 })
    }

    @Test func exportNamesEachUndecodableKeyAndExportsTheRest() async throws {
        let file = try pipeline(
            "tampered.yaml",
            Self.seeded + """
                jobs:
                  - { type: migrate, name: load, from: seed, to: backup }
                  - { type: export, name: fromBackup, from: backup, path: out/backup.json }
                  - { type: export, name: fromStore, from: store, path: out/store.json }

                """)
        await #expect(try run([file, "--job", "load", "--quiet"]).status == 0)
        // Two values no key can open: one cut short, one that is not an envelope at all.
        let theme = directory.file("data/backup/settings.theme")
        let sealed = try String(contentsOfFile: theme, encoding: .utf8)
        try String(sealed.dropLast(12)).write(toFile: theme, atomically: true, encoding: .utf8)
        try "cs1:k1:not-base64!".write(
            toFile: directory.file("data/backup/favourites"), atomically: true, encoding: .utf8)
        for (name, path) in [("fromBackup", "out/backup.json"), ("fromStore", "out/store.json")] {
            let result = try await run([file, "--job", name, "--report", "-", "--quiet"])
            #expect(result.status == 1, "\(name): \(result.standardError)")
            let parsed = try await report(result)
            let failures = job(parsed, 0)["failures"] as? [[String: Any]] ?? []
            #expect(
                failures.compactMap { $0["key"] as? String }.sorted() == ["favourites", "settings.theme"], "\(name)")
            #expect(failures.allSatisfy { $0["code"] as? String == "ERR_DECODE" }, "\(name): \(failures)")
            #expect(counts(parsed, 0)["items"] == 1, "\(name)")
            // What could be read was exported all the same.
            let exported = try String(contentsOfFile: directory.file(path), encoding: .utf8)
            #expect(exported.contains("settings.font") && !exported.contains("favourites"), "\(name)")
        }
    }

    @Test func aDryRunChangesNothingButTheReport() async throws {
        let file = try pipeline(
            "dry.yaml", Self.seeded + "jobs:\n  - { type: migrate, from: seed, to: primary }\n  - { type: sync }\n")
        await #expect(try run([file, "--quiet"]).status == 0)
        // Make the next sync have something to do: one copy is deleted, which the sync would propagate.
        try FileManager.default.removeItem(atPath: directory.file("data/backup/favourites"))
        let before = try snapshot()
        let dry = try await run([file, "--dry-run", "--report", "-", "--quiet"])
        #expect(dry.status == 0)
        let parsed = try await report(dry)
        #expect(parsed["dryRun"] as? Bool == true)
        // The migrate copied all three on the first run and its snapshot vouches for them: it would copy none.
        #expect(counts(parsed, 0)["copied"] == 0 && counts(parsed, 0)["unchanged"] == 3)
        #expect(counts(parsed, 1)["deleted"] == 1)  // would delete
        let sync = try #require(job(parsed, 1)["sync"] as? [String: Any])
        #expect(sync["deletions"] as? [String] == ["favourites"])
        // Every file is as it was, and nothing was added (not even SQLite's -wal and -shm beside a database).
        let after = try snapshot()
        #expect(after == before, "added: \(after.keys.filter { before[$0] == nil }.sorted())")
    }

    private func snapshot() throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: directory.path)
        while let path = enumerator?.nextObject() as? String {
            let full = directory.file(path)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[path] = FileManager.default.contents(atPath: full)
            } else {
                files[path + "/"] = Data()
            }
        }
        return files
    }

    @Test func aDryRunAfterARealRunSeesWhatThatRunCommitted() async throws {
        let items = (0..<120).map { "      key.\($0): '{\"n\":\($0),\"updatedAt\":\($0)}'\n" }.joined()
        let body =
            "providers:\n  seed:\n    type: memory\n    items:\n\(items)"
            + "  primary: { type: sqlite, path: data/primary.db, create: true }\n"
            + "  backup: { type: directory, path: data/backup, create: true }\n"
            + "store:\n  providers: [primary, backup]\n  writeMode: mirror\n"
            + "jobs:\n  - { type: migrate, from: seed, to: primary, overwrite: ifMissing }\n  - { type: sync }\n"
            + "  - { type: verify, provider: primary }\n"
        var failures: [String] = []
        for attempt in 0..<20 {
            let copy = try TemporaryDirectory()
            let file = copy.file("again.yaml")
            try ("version: 1\nname: again\n" + body).write(toFile: file, atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(atPath: copy.file("data"), withIntermediateDirectories: true)
            // Another program keeps the database open, so what the run commits stays in the write-ahead log.
            let app = try SQLiteProvider(path: copy.file("data/primary.db"))
            let first = try await run([file, "--report", "-", "--quiet"])
            #expect(first.status == 0, "\(first.standardError)")
            let dry = try await run([file, "--dry-run", "--report", "-", "--quiet"])
            let real = try await run([file, "--report", "-", "--quiet"])
            let dryCounts = try await report(dry)["jobs"] as? [[String: Any]] ?? []
            let realCounts = try await report(real)["jobs"] as? [[String: Any]] ?? []
            let describe = { (jobs: [[String: Any]]) in
                jobs.map {
                    "\($0["status"] ?? "?") \(($0["counts"] as? [String: Int] ?? [:]).sorted { $0.key < $1.key })"
                }
            }
            if dry.status != 0 || describe(dryCounts) != describe(realCounts) {
                failures.append(
                    "copy \(attempt): dry run exited \(dry.status) with \(describe(dryCounts)), "
                        + "the real run \(describe(realCounts))")
            }
            await app.close()
        }
        #expect(failures.isEmpty, "\(failures.count) of 20 dry runs differed: \(failures)")
    }

    @Test func aSecondRunOfTheSamePipelineIsRefusedAndAStaleLockIsNot() async throws {
        let file = try pipeline(
            "locked.yaml",
            Self.seeded + "jobs:\n  - { type: flush }\n"
                + "report: { path: 'reports/{name}-{startedAt}.json', latest: reports/latest.json }\n")
        let state = directory.file(".cloudsync/locked")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        // A live process holds the lock: this test's own.
        let held = try HeldRunLock(state: state)
        let refused = try await run([file, "--quiet"])
        #expect(refused.status == 75)
        #expect(refused.standardError.contains("already running (process \(getpid())"))
        // The refused run leaves a report of its own, but not `latest`: that stays the running run's to write.
        let reports = try FileManager.default.contentsOfDirectory(atPath: directory.file("reports"))
        #expect(reports.count == 1 && reports[0].hasPrefix("locked-"), "\(reports)")
        try await expectValidReport(directory.file("reports/" + reports[0]))
        let parsed = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: directory.file("reports/" + reports[0])))) as? [String: Any]
        )
        #expect(parsed["status"] as? String == "error")
        #expect((parsed["error"] as? [String: Any])?["code"] as? String == "ERR_LOCKED")
        // A lock file no process holds does not block, whatever it says: gone, unrelated and live, or nothing.
        held.release()
        for leftover in ["999999\n", "\(getpid())\n", ""] {
            try leftover.write(toFile: state + "/run.lock", atomically: true, encoding: .utf8)
            await #expect(try run([file, "--quiet"]).status == 0, "over a lock file holding \"\(leftover)\"")
            // The file stays, emptied: removing it could let two later runs lock two different files.
            #expect(try String(contentsOfFile: state + "/run.lock", encoding: .utf8) == "")
        }
    }

    @Test func exitCodesSayWhatKindOfFailure() async throws {
        let broken = try pipeline("broken.yaml", "providers: {}\n")
        await #expect(try run([broken]).status == 64)
        let refused = try pipeline("refused.yaml", Self.seeded + "jobs:\n  - { type: clear, provider: primary }\n")
        let refusal = try await run([refused, "--report", "-", "--quiet"])
        #expect(refusal.status == 2)
        await #expect((job(try report(refusal), 0)["error"] as? [String: Any])?["code"] as? String == "ERR_CONFIG")
        await #expect(try run([refused, "--yes", "--quiet"]).status == 0)
        let failing = try pipeline(
            "failing.yaml",
            Self.seeded
                + "jobs:\n  - { type: migrate, from: seed, to: phone }\n".replacingOccurrences(
                    of: "phone", with: "primary")
                + "  - { type: quota, warnAbove: 0.0, failOnWarning: true }\n")
        // Quota of a provider with no total never warns; a tiny sqlite limit does.
        let limited = try String(contentsOfFile: failing, encoding: .utf8).replacingOccurrences(
            of: "path: data/primary.db, create: true }",
            with: "path: data/limited.db, maxBytes: 28672, pageSize: 4096, create: true }")
        try limited.write(toFile: failing, atomically: true, encoding: .utf8)
        let result = try await run([failing, "--report", "-", "--quiet"])
        #expect(result.status == 1)
        // The failed job's line says why: its first failing key, code and message.
        #expect(result.standardError.contains(" ERR_QUOTA_EXCEEDED "), "\(result.standardError)")
        #expect(result.standardError.contains("; first: "), "\(result.standardError)")
        await #expect(try report(result)["status"] as? String == "failed")
        await #expect(try run(["--bogus"]).status == 64)
        await #expect(try run([failing, "--job", "nope"]).status == 64)
    }

    @Test func aReportGoesWhereThePipelineSays() async throws {
        let file = try pipeline(
            "reported.yaml",
            Self.seeded + "jobs:\n  - { type: flush }\nreport:\n  path: reports/{name}-{startedAt}.json\n")
        let result = try await run([file])
        #expect(result.status == 0)
        let reports = try FileManager.default.contentsOfDirectory(atPath: directory.file("reports"))
        #expect(reports.count == 1)
        #expect(reports[0].hasPrefix("reported-2"))
        try await expectValidReport(directory.file("reports/" + reports[0]))
        #expect(result.standardError.contains("ok: report written to"))
    }

    @Test func sigintFinishesTheBatchAndReportsInterrupted() async throws {
        let file = try seededDirectoryPipeline(
            "long", keys: 3000, directory: "slow",
            jobs: [
                "{ type: migrate, name: first, from: seed, to: slow }",
                "{ type: migrate, name: second, from: seed, to: slow }",
            ])
        let process = try RunningProcess(
            executable, ["run", file, "--quiet", "--report", directory.file("interrupted.json")])
        // Once the first files appear, interrupt.
        let slow = directory.file("data/slow")
        try await process.signal(SIGINT, once: { RunningProcess.entries(in: slow) >= 5 }, within: 30)
        #expect(await process.exited().status == 130)
        try await expectValidReport(directory.file("interrupted.json"))
        let parsed = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: directory.file("interrupted.json"))))
                as? [String: Any])
        #expect(parsed["status"] as? String == "interrupted")
        // The migration stopped after the batch it was in, well short of its 3000 keys.
        #expect(job(parsed, 0)["status"] as? String == "interrupted")
        #expect((counts(parsed, 0)["copied"] ?? 3000) < 3000)
        #expect(job(parsed, 1)["status"] as? String == "skipped")
    }

    /// With the progress line drawn, the interruption notice first clears it, so the two do not share a line.
    @Test func sigintClearsTheProgressLineBeforeItsNotice() async throws {
        let file = try seededDirectoryPipeline(
            "drawn", keys: 3000, directory: "drawn", jobs: ["{ type: migrate, name: first, from: seed, to: drawn }"])
        // Redrawn in place only without NO_COLOR, which the test runner sets.
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = nil
        let process = try RunningProcess(
            executable, ["run", file, "--progress", "always", "--report", directory.file("drawn.json")],
            environment: environment)
        try await process.signal(
            SIGINT, once: { RunningProcess.entries(in: self.directory.file("data/drawn")) >= 5 }, within: 30)
        let result = await process.exited()
        #expect(result.status == 130)
        #expect(
            result.standardError.contains("\r\u{1B}[2Kinterrupted: finishing the current batch"),
            "\(result.standardError.debugDescription)")
    }

    @Test func outboxCommandsListFlushAndDiscard() async throws {
        let file = try pipeline("queued.yaml", Self.seeded + "jobs:\n  - { type: flush }\n")
        let state = directory.file(".cloudsync/queued")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try StateDatabase(path: state + "/state.db").close()
        do {
            let storage = try SQLiteOutboxStorage(path: state + "/outbox.db")
            for (id, key) in [(1, "a"), (2, "b")] {
                try storage.replace(
                    OutboxEntry(
                        id: Int64(id), key: key, operation: .set, encodedValue: "value of \(key)", provider: "primary",
                        attempts: 1, nextAttemptAtMs: 0, enqueuedAtMs: SystemClock().nowMilliseconds(),
                        lastErrorCode: "ERR_OFFLINE"))
            }
        }
        let listed = try await ProcessRunner.run(executable, ["outbox", "list", file])
        #expect(listed.status == 0)
        #expect(listed.standardOutput.contains("set \"a\" on primary (attempt 1"))
        #expect(!listed.standardOutput.contains("value of a"))
        #expect(listed.standardError == "2 queued writes\n")
        let flushed = try await ProcessRunner.run(executable, ["outbox", "flush", file])
        #expect(flushed.standardError == "drained 2, remaining 0, dropped 0\n")
        let primary = try SQLiteProvider(path: directory.file("data/primary.db"))
        #expect(try await primary.get(["a"])[0].get() == "value of a")
        try SQLiteOutboxStorage(path: state + "/outbox.db").replace(
            OutboxEntry(
                id: 3, key: "c", operation: .remove, encodedValue: nil, provider: "primary", attempts: 1,
                nextAttemptAtMs: 0, enqueuedAtMs: 0, lastErrorCode: "ERR_OFFLINE"))
        let discarded = try await ProcessRunner.run(executable, ["outbox", "discard", file, "--yes"])
        #expect(discarded.standardError == "discarded 1 queued write\n")
        #expect(try SQLiteOutboxStorage(path: state + "/outbox.db").loadAll().isEmpty)
    }

    @Test func outboxCommandsThatWriteWaitForNoRunAndListingNeverBlocks() async throws {
        let file = try pipeline("busy.yaml", Self.seeded + "jobs:\n  - { type: flush }\n")
        await #expect(try run([file, "--quiet"]).status == 0)
        let state = directory.file(".cloudsync/busy")
        // A live process holds the pipeline: this test's own.
        let held = try HeldRunLock(state: state)
        defer { withExtendedLifetime(held) {} }
        for command in [["flush"], ["discard", "--yes"]] {
            let refused = try await ProcessRunner.run(executable, ["outbox"] + command + [file])
            #expect(refused.status == 75, "outbox \(command)")
            #expect(refused.standardError.contains("already running (process \(getpid())"))
        }
        #expect(try await ProcessRunner.run(executable, ["outbox", "list", file]).status == 0)
        #expect(try await ProcessRunner.run(executable, ["history", file]).status == 0)
    }

    @Test func aCleanRunLeavesNoLogFilesAndIsInTheHistory() async throws {
        let file = try pipeline(
            "tidy.yaml", Self.seeded + "jobs:\n  - { type: migrate, from: seed, to: primary }\n  - { type: sync }\n")
        await #expect(try run([file, "--quiet"]).status == 0)
        await #expect(try run([file, "--quiet", "--dry-run", "--report", "-"]).status == 0)
        let leftovers = (FileManager.default.enumerator(atPath: directory.path)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix("-wal") || $0.hasSuffix("-shm") || $0.hasSuffix("-journal") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        let history = try await ProcessRunner.run(executable, ["history", file, "--json"])
        #expect(history.status == 0)
        let runs = try #require(
            try JSONSerialization.jsonObject(with: Data(history.standardOutput.utf8)) as? [[String: Any]])
        // The dry run is not recorded: it writes nothing, the history included.
        #expect(runs.count == 1)
        #expect(runs.first?["status"] as? String == "ok")
        #expect(runs.first?["jobs"] as? [String: Int] == ["ok": 2])
        let text = try await ProcessRunner.run(executable, ["history", file, "--limit", "5"])
        #expect(text.standardOutput.contains("  ok  jobs: 2 ok  "))
        #expect(try await ProcessRunner.run(executable, ["history", file, "--limit", "0"]).status == 64)
    }

    @Test func aMissingSourceOrUnmountedDiskIsAnErrorNotAnEmptySuccess() async throws {
        let file = try pipeline(
            "absent.yaml",
            """
            providers:
              old: { type: sqlite, path: data/old-settings.db }
              new: { type: sqlite, path: data/settings.db, create: true }
              backup: { type: directory, path: /nonexistent-mount/backup }
            store:
              providers: [new]
            jobs:
              - { type: migrate, name: copy, from: old, to: new }
              - { type: verify, name: check, provider: backup }
              - { type: quota }
            report: { path: reports/absent.json }

            """)
        let result = try await run([file, "--quiet"])
        #expect(result.status == 2)
        try await expectValidReport(directory.file("reports/absent.json"))
        let parsed = try #require(
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: directory.file("reports/absent.json"))))
                as? [String: Any])
        #expect(parsed["status"] as? String == "error")
        let copy = job(parsed, 0)
        #expect(copy["status"] as? String == "error")
        let copyError = copy["error"] as? [String: Any]
        #expect(copyError?["code"] as? String == "ERR_CONFIG")
        #expect(copyError?["provider"] as? String == "old")
        let message = copyError?["message"] as? String ?? ""
        #expect(message.contains(directory.file("data/old-settings.db")) && message.contains("create: true"))
        #expect(
            (job(parsed, 1)["error"] as? [String: Any])?["message"] as? String ?? ""
                == "the directory /nonexistent-mount/backup does not exist; check the path (is its disk mounted?), or set `create: true` on the provider to create it"
        )
        #expect(job(parsed, 2)["status"] as? String == "ok")  // jobs that need neither still run
        // Nothing was created where nothing should be.
        #expect(!FileManager.default.fileExists(atPath: directory.file("data/old-settings.db")))
        #expect(!FileManager.default.fileExists(atPath: "/nonexistent-mount"))
        let providers = parsed["providers"] as? [[String: Any]] ?? []
        #expect(
            (providers.first { $0["id"] as? String == "old" }?["unavailable"] as? [String: Any])?["reason"] as? String
                == "misconfigured")
        // A dry run says the same.
        await #expect(try run([file, "--quiet", "--dry-run", "--report", "-"]).status == 2)
    }

    @Test func aRunThatCannotStartStillWritesAReportAMonitorCanRead() async throws {
        try "not a directory".write(toFile: directory.file("blocker"), atomically: true, encoding: .utf8)
        let file = try pipeline(
            "blocked.yaml",
            Self.seeded + "state: blocker/state\njobs:\n  - { type: flush }\n"
                + "report: { path: reports/blocked.json, latest: reports/latest.json }\n")
        let result = try await run([file, "--quiet"])
        #expect(result.status == 2)
        #expect(!result.standardError.contains("Error Domain"), "\(result.standardError)")
        // Quiet or not, the closing line says why the run could not run, not only where its report went.
        #expect(
            result.standardError.contains("error — ERR_CONFIG: cannot use the state directory "),
            "\(result.standardError)")
        #expect(result.standardError.contains("; report written to \(directory.file("reports/blocked.json"))"))
        for path in ["reports/blocked.json", "reports/latest.json"] {
            try await expectValidReport(directory.file(path))
            let parsed = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory.file(path))))
                    as? [String: Any])
            #expect(parsed["status"] as? String == "error")
            #expect(job(parsed, 0)["status"] as? String == "skipped")
            let message = (parsed["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(
                message.hasPrefix("cannot use the state directory ") && !message.contains("Error Domain"), "\(message)")
        }
    }

    @Test func latestKeepAndMetricsDescribeTheRunsForAMonitor() async throws {
        let file = try pipeline(
            "watched.yaml",
            Self.seeded
                + "jobs:\n  - { type: migrate, name: copy, from: seed, to: primary }\n  - { type: quota, name: space }\n"
                + "report: { path: 'reports/{name}-{startedAt}.json', latest: reports/latest.json, keep: 2, "
                + "metrics: metrics/cloudsync.prom }\n")
        for _ in 0..<3 { await #expect(try run([file, "--quiet"]).status == 0) }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.file("reports"))
        #expect(files.contains("latest.json"))
        // Three runs, two kept: the newest two, by their timestamped names.
        let reports = files.filter { $0.hasPrefix("watched-") }.sorted()
        #expect(reports.count == 2, "\(files)")
        let newest = reports.last ?? ""
        #expect(
            try String(contentsOfFile: directory.file("reports/latest.json"), encoding: .utf8)
                == String(contentsOfFile: directory.file("reports/" + newest), encoding: .utf8))
        // prometheus-client's own parser reads the textfile.
        let check = try await ProcessRunner.run(
            root + "/.build/pyenv/bin/python3",
            [root + "/scripts/check_prometheus.py", directory.file("metrics/cloudsync.prom")])
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
        let samples = Set(check.standardOutput.split(separator: "\n").map(String.init))
        #expect(samples.contains("cloudsync_last_run_status{pipeline=watched,status=ok} 1"))
        #expect(samples.contains("cloudsync_last_run_status{pipeline=watched,status=failed} 0"))
        // The last of three runs found the three keys copied already.
        #expect(
            samples.contains("cloudsync_last_run_job_count{count=unchanged,job=copy,pipeline=watched,type=migrate} 3"))
        #expect(samples.contains("cloudsync_last_run_job_status{job=space,pipeline=watched,status=ok,type=quota} 1"))
        #expect(samples.contains("cloudsync_outbox_pending{pipeline=watched} 0"))
        #expect(samples.contains { $0.hasPrefix("cloudsync_last_run_timestamp_seconds{pipeline=watched} 1.") })
    }

    /// The brief's own example: copy every `prefs.*` key from an application's database, which is read as it is and
    /// never changed.
    @Test func prefsKeysAreCopiedFromAnApplicationsOwnTable() async throws {
        let app = try SQLiteDatabase(
            path: directory.file("app.db"), options: SQLiteDatabase.Options(writeAheadLog: false))
        try await app.write { db in
            try db.executeScript(
                """
                CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
                INSERT INTO settings VALUES ('prefs.theme', 'dark'), ('prefs.font', '14'), ('session.token', 'x');
                """)
        }
        await app.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: directory.file("app.db")))
        let file = try pipeline(
            "prefs.yaml",
            """
            providers:
              app: { type: sqlite, path: app.db, table: settings, keyColumn: name, valueColumn: value, readOnly: true }
              new: { type: sqlite, path: data/settings.db, create: true }
            store:
              providers: [new]
            jobs:
              - { type: migrate, from: app, to: new, keys: 'prefs.*' }

            """)
        let result = try await run([file, "--quiet", "--report", "-"])
        #expect(result.status == 0, "\(result.standardError)")
        await #expect(
            counts(try report(result), 0) == [
                "copied": 2, "skipped": 0, "unchanged": 0, "failed": 0, "queued": 0, "changedSincePlan": 0,
            ])
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("app.db"))) == before)
        // Without the mapping the same database is refused, naming its table and the fields to set.
        let unmapped = try pipeline(
            "unmapped.yaml",
            "providers:\n  app: { type: sqlite, path: app.db }\nstore:\n  providers: [app]\njobs:\n  - { type: verify, provider: app }\n"
        )
        let refused = try await run([unmapped, "--quiet", "--report", "-"])
        #expect(refused.status == 2)
        let message = await (job(try report(refused), 0)["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(message.contains("holds tables of its own (settings)") && message.contains("keyColumn"), "\(message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file("app.db"))) == before)
    }

    /// Every example runs on something shipped or on the demo's output, in the order their headers give, and does
    /// real work: none succeeds on nothing.
    @Test func everyExampleRunsOnTheDemosOutputInTheOrderItsHeaderSays() async throws {
        let copy = directory.file("examples")
        try FileManager.default.copyItem(atPath: root + "/pipelines", toPath: copy)
        for generated in ["demo-output", "data", "backups", "reports", ".cloudsync"] {
            try? FileManager.default.removeItem(atPath: copy + "/" + generated)
        }
        let order = [
            ("demo", "load-sample", "imported"), ("scheduled-sync", "reconcile", "keys"),
            ("migration-plan", "copy-settings", "copied"), ("encrypted-backup", "copy-to-backup", "copied"),
            ("restore-backup", "restore", "imported"),
        ]
        for (example, jobName, count) in order {
            let source = try String(contentsOfFile: copy + "/\(example).yaml", encoding: .utf8)
            if example != "demo" { #expect(source.contains("`make run` first") || source.contains("`make run`, then")) }
            let result = try await run([copy + "/\(example).yaml", "--quiet", "--report", "-"])
            #expect(result.status == 0, "\(example): \(result.standardError)")
            let parsed = try await report(result)
            let jobs = parsed["jobs"] as? [[String: Any]] ?? []
            let done = jobs.first { $0["name"] as? String == jobName }?["counts"] as? [String: Int] ?? [:]
            #expect((done[count] ?? 0) > 100, "\(example): \(jobName) \(done)")
        }
    }

    @Test func clearWalksEveryPageOfAProvider() async throws {
        let file = try seededDirectoryPipeline(
            "wipe", keys: 1234, directory: "files",
            jobs: [
                "{ type: migrate, name: fill, from: seed, to: files }",
                "{ type: clear, name: wipe, provider: files, confirm: true }",
            ])
        let result = try await run([file, "--report", "-", "--quiet"])
        #expect(result.status == 0)
        let parsed = try await report(result)
        #expect(counts(parsed, 1) == ["removed": 1234, "failed": 0, "queued": 0])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("data/files")).isEmpty)
    }

    @Test func keygenNeverOverwritesAndExits73() async throws {
        let path = directory.file("keys/vault.key")
        let before = try String(contentsOfFile: path, encoding: .utf8)
        let again = try await ProcessRunner.run(executable, ["keygen", "--out", path])
        #expect(again.status == ExitCode.cannotCreate.rawValue)
        #expect(again.status == 73)
        #expect(again.standardOutput.isEmpty)
        #expect(
            again.standardError
                == "Error: \(path) already exists; refusing to overwrite a key (whatever it encrypted would be lost). "
                + "Give --out a new path, or move the old key away first and keep it while anything needs it\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == before)
        let fresh = try await ProcessRunner.run(executable, ["keygen", "--out=" + directory.file("keys/other.key")])
        #expect(fresh.status == 0)
    }

    @Test func progressLinesShowRateAndETAWhenTheTotalIsKnown() {
        #expect(
            progressLine("copy", 250, 1000, elapsed: .seconds(2))
                == "copy: 250/1000 keys, 125 keys/s, 2.0 s elapsed, ETA 6.0 s")
        #expect(progressLine("sync", 40, nil, elapsed: .milliseconds(500)) == "sync: 40 keys, 80 keys/s, 0.5 s elapsed")
        #expect(
            progressLine("verify", 3, 12, unit: "packs", elapsed: .seconds(2))
                == "verify: 3/12 packs, 1.5 packs/s, 2.0 s elapsed, ETA 6.0 s")
    }
}

/// Short and attached option forms, `--quiet`, and the outbox's selection and machine output.
extension RunCommandTests {
    @Test func shortAndAttachedFormsMeanTheLongOnes() async throws {
        let file = try pipeline(
            "forms.yaml", Self.seeded + "jobs:\n  - { type: flush, name: first }\n  - { type: flush, name: second }\n")
        for arguments in [
            [file, "-j", "second", "--report", "-", "-q"], [file, "--job=second", "--report=-", "--quiet"],
            ["--progress=never", "-q", "--job", "second", "--report=-", "--", file],
        ] {
            let result = try await run(arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
            #expect(result.standardError.isEmpty, "\(arguments)")
            await #expect((try report(result)["jobs"] as? [[String: Any]])?.map { $0["name"] as? String } == ["second"])
        }
        let mistyped = try await run([file, "-j", "secnd"])
        #expect(mistyped.status == 64)
        #expect(
            mistyped.standardError.hasPrefix(
                "Error: no job named 'secnd' in \(file); its jobs: first, second; did you mean 'second'?\n"
                    + "Usage: cloudsync run FILE "))
    }

    @Test func aThousandKeyBatchIntoADirectoryFitsAServicesDefaultOfOpenFiles() async throws {
        // systemd and most shells give a process 1,024 open files: a batch of 1,000 keys (the directory provider's
        // batch) must not need a descriptor pair for every key at once.
        let file = try seededDirectoryPipeline(
            "descriptors", keys: 1_000, directory: "files", jobs: ["{ type: migrate, from: seed, to: files }"])
        let result = try await ProcessRunner.run(
            "/bin/sh", ["-c", "ulimit -n 1024 && exec \"$0\" run \"$1\" --report - --quiet", executable, file])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try await report(result)
        #expect(counts(report, 0)["copied"] == 1_000, "\(counts(report, 0))")
    }

    @Test func quietStillNamesEveryJobThatFailedOrErrored() async throws {
        let file = try pipeline(
            "quiet.yaml",
            Self.seeded
                + "jobs:\n  - { type: migrate, name: load, from: seed, to: primary }\n"
                + "  - { type: clear, name: wipe, provider: primary }\n  - { type: flush, name: after }\n")
        let result = try await run([file, "--quiet", "--report", directory.file("quiet.json")])
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError
                == "wipe (clear): error — ERR_CONFIG: clear removes data: refused without `confirm: true` in the job "
                + "or --yes on the command line\n")
        let fine = try await run([file, "-q", "--yes", "--report", directory.file("fine.json")])
        #expect(fine.status == 0)
        #expect(fine.standardError.isEmpty)
    }

    /// Writes `entries` (key, provider, enqueued at in ms) to the outbox of the pipeline `name`, and returns its file.
    private func queuedPipeline(_ name: String, _ entries: [(String, String, Int64)]) throws -> String {
        let file = try pipeline("\(name).yaml", Self.seeded + "jobs:\n  - { type: flush }\n")
        let state = directory.file(".cloudsync/\(name)")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        // A run leaves both: the outbox belongs to the pipeline's state.
        try StateDatabase(path: state + "/state.db").close()
        let storage = try SQLiteOutboxStorage(path: state + "/outbox.db")
        for (index, (key, provider, enqueued)) in entries.enumerated() {
            try storage.replace(
                OutboxEntry(
                    id: Int64(index + 1), key: key, operation: .set, encodedValue: "secret \(key)", provider: provider,
                    attempts: 2, nextAttemptAtMs: enqueued + 90_000, enqueuedAtMs: enqueued,
                    lastErrorCode: "ERR_OFFLINE"))
        }
        return file
    }

    @Test func outboxListShowsISOTimesAndHasJSON() async throws {
        let now = SystemClock().nowMilliseconds()
        let midnight = now - now % 86_400_000
        let day = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(midnight) / 1000)).prefix(10)
        let file = try queuedPipeline("listed", [("a", "primary", midnight)])
        let text = try await ProcessRunner.run(executable, ["outbox", "list", file])
        #expect(text.status == 0)
        #expect(
            text.standardOutput
                == "set \"a\" on primary (attempt 2, next at \(day)T00:01:30.000Z, queued at \(day)T00:00:00.000Z, "
                + "last error ERR_OFFLINE)\n")
        #expect(text.standardError == "1 queued write\n")
        let json = try await ProcessRunner.run(executable, ["outbox", "list", "--json", file])
        #expect(json.status == 0)
        #expect(!json.standardOutput.contains("secret"))
        let entries = try #require(
            try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries[0]["key"] as? String == "a")
        #expect(entries[0]["operation"] as? String == "set")
        #expect(entries[0]["provider"] as? String == "primary")
        #expect(entries[0]["attempts"] as? Int == 2)
        #expect(entries[0]["enqueuedAt"] as? String == "\(day)T00:00:00.000Z")
        #expect(entries[0]["nextAttemptAt"] as? String == "\(day)T00:01:30.000Z")
        #expect(entries[0]["lastErrorCode"] as? String == "ERR_OFFLINE")
        // Before anything was queued, the list is empty, not missing.
        let empty = try pipeline("nothing.yaml", Self.seeded + "jobs:\n  - { type: flush }\n")
        #expect(
            try await ProcessRunner.run(executable, ["outbox", "list", "--json", empty]).standardOutput == "[\n\n]\n")
    }

    @Test func outboxDiscardNeedsYesAndSelectsByKeyAndProvider() async throws {
        let now = SystemClock().nowMilliseconds()
        let file = try queuedPipeline(
            "selected", [("a", "primary", now), ("b", "primary", now), ("settings.x", "backup", now)])
        let outbox = directory.file(".cloudsync/selected/outbox.db")
        let asked = try await ProcessRunner.run(executable, ["outbox", "discard", file, "--key", "settings.*"])
        #expect(asked.status == 64)
        let lines = asked.standardError.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        #expect(lines[0] == "would discard 1 of 3 queued writes:")
        #expect(lines[1].hasPrefix("  set \"settings.x\" on backup (attempt 2, next at "))
        #expect(
            Array(lines[2...]) == [
                "Error: outbox discard drops writes for good; add --yes to discard them",
                "Usage: cloudsync outbox discard FILE [--key GLOB]... [--provider ID] [--yes]",
                "  See 'cloudsync help outbox discard'.",
            ])
        #expect(try SQLiteOutboxStorage(path: outbox).loadAll().count == 3)

        let byKey = try await ProcessRunner.run(executable, ["outbox", "discard", file, "--key=settings.*", "--yes"])
        #expect(byKey.status == 0)
        #expect(byKey.standardError == "discarded 1 queued write; 2 still queued\n")
        let byProvider = try await ProcessRunner.run(
            executable, ["outbox", "discard", file, "--provider", "primary", "--key", "b", "--key", "z?", "--yes"])
        #expect(byProvider.standardError == "discarded 1 queued write; 1 still queued\n")
        #expect(try SQLiteOutboxStorage(path: outbox).loadAll().map(\.key) == ["a"])

        let unknown = try await ProcessRunner.run(
            executable, ["outbox", "discard", file, "--provider", "primry", "--yes"])
        #expect(unknown.status == 64)
        #expect(
            unknown.standardError.hasPrefix(
                "Error: no provider 'primry' in \(file); its providers: seed, primary, backup; did you mean 'primary'?\n"
            ))
        #expect(try SQLiteOutboxStorage(path: outbox).loadAll().count == 1)
    }
}
