import CloudSync
import CloudSyncBackup
import CloudSyncTesting
import Foundation
import Testing

/// `forget`'s keep rules against restic's own `forget --dry-run` on the same snapshot times: restic is the
/// reference for what `--keep-*` means, so where the two disagree, this code is wrong.
@Suite(.timeLimit(.minutes(10))) struct KeepPolicyTests {
    /// Snapshot times over two years, uneven: several a day, gaps of weeks, a year boundary and an ISO week that
    /// straddles it.
    static let times: [String] = [
        "2024-11-30 23:59:00", "2024-12-30 02:30:00", "2024-12-31 23:00:00", "2025-01-01 00:30:00",
        "2025-01-05 02:30:00", "2025-02-15 12:00:00", "2025-03-01 02:30:00", "2025-03-01 14:00:00",
        "2025-06-30 02:30:00", "2025-07-01 02:30:00", "2025-12-29 02:30:00", "2026-01-04 02:30:00",
        "2026-03-10 02:30:00", "2026-03-11 02:30:00", "2026-03-11 09:15:00", "2026-03-11 09:45:00",
        "2026-03-12 02:30:00", "2026-03-16 02:30:00", "2026-03-20 02:30:00", "2026-03-29 02:30:00",
        "2026-03-30 02:30:00", "2026-03-31 02:30:00", "2026-04-01 02:30:00",
    ]

    /// Policies as restic flags and as a ``KeepPolicy``.
    static let policies: [(flags: [String], policy: KeepPolicy)] = {
        func policy(_ build: (inout KeepPolicy) -> Void) -> KeepPolicy {
            var policy = KeepPolicy()
            build(&policy)
            return policy
        }
        return [
            (["--keep-last", "3"], policy { $0.last = 3 }),
            (["--keep-hourly", "4"], policy { $0.hourly = 4 }),
            (["--keep-daily", "7"], policy { $0.daily = 7 }),
            (["--keep-weekly", "5"], policy { $0.weekly = 5 }),
            (
                ["--keep-monthly", "6", "--keep-yearly", "3"],
                policy {
                    $0.monthly = 6
                    $0.yearly = 3
                }
            ),
            (["--keep-within", "20d"], policy { $0.within = KeepPolicy.Span("20d") }),
            (["--keep-within", "1m2d"], policy { $0.within = KeepPolicy.Span("1m2d") }),
            (["--keep-within", "1y3h"], policy { $0.within = KeepPolicy.Span("1y3h") }),
            (
                [
                    "--keep-last", "2", "--keep-daily", "3", "--keep-weekly", "2", "--keep-monthly", "2",
                    "--keep-yearly", "1",
                ],
                policy {
                    $0.last = 2
                    $0.daily = 3
                    $0.weekly = 2
                    $0.monthly = 2
                    $0.yearly = 1
                }
            ),
        ]
    }()

    @Test func keepsWhatResticKeepsForEveryRule() async throws {
        guard
            let executable = ["/usr/bin/restic", "/usr/local/bin/restic"].first(
                where: FileManager.default.isExecutableFile)
        else {
            Issue.record("restic is missing: `make test` installs Debian's restic, the reference for the keep rules")
            return
        }
        let directory = try TemporaryDirectory()
        try "password\n".write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
        try "x".write(toFile: directory.file("data/file"), atomically: true, encoding: .utf8)
        let environment = [
            "RESTIC_PASSWORD_FILE": directory.file("password"), "RESTIC_REPOSITORY": directory.file("repo"),
            "RESTIC_CACHE_DIR": directory.file("cache"), "TZ": "UTC", "PATH": "/usr/bin:/bin",
        ]
        // Its key derivation takes a core for half a second a call. It once ran at `nice 19` to let the tests waiting
        // on emulators go first; on a loaded machine that starved it past its time limit, and those tests now wait
        // behind few others (scripts/run-tests.py limits how many run at once).
        func restic(_ arguments: [String]) async throws -> String {
            let result = try await ProcessRunner.run(executable, arguments, environment: environment)
            #expect(result.status == 0, "restic \(arguments): \(result.standardError)")
            return result.standardOutput
        }
        _ = try await restic(["init", "-q"])
        for time in Self.times {
            _ = try await restic(["backup", "-q", "--host", "h", "--time", time, directory.file("data")])
        }
        // Every snapshot as restic lists it: its id and its time, in the summaries forget works on.
        let listed = try JSONSerialization.jsonObject(with: Data(try await restic(["snapshots", "--json"]).utf8))
        let snapshots = try #require(listed as? [[String: Any]]).map { snapshot in
            let time = ISO8601DateFormatter().date(from: snapshot["time"] as? String ?? "") ?? .distantPast
            return SnapshotSummary(
                id: snapshot["id"] as? String ?? "", time: Int64((time.timeIntervalSince1970 * 1000).rounded()),
                source: "data", pipeline: "p", tags: [], keys: 1, bytes: 1, host: "h")
        }
        #expect(snapshots.count == Self.times.count)
        for (flags, policy) in Self.policies {
            let answer = try JSONSerialization.jsonObject(
                with: Data(try await restic(["forget", "--dry-run", "--json"] + flags).utf8))
            let groups = try #require(answer as? [[String: Any]])
            let kept = Set(groups.flatMap { ($0["keep"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String } })
            #expect(policy.kept(snapshots) == kept, "\(flags)")
        }
    }

    @Test func spansReadAsResticWritesThemAndNothingElse() {
        #expect(KeepPolicy.Span("1y6m")?.description == "1y6m")
        #expect(KeepPolicy.Span("2w")?.days == 14)
        #expect(KeepPolicy.Span("3d12h")?.hours == 12)
        for wrong in ["", "3", "d", "3 days", "1.5d", "-1d", "0d", "3x"] {
            #expect(KeepPolicy.Span(wrong) == nil, "\(wrong)")
        }
    }
}
