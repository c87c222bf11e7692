import CloudSyncTesting
import Foundation
import Testing

/// `make test` runs the suite under scripts/run-tests.py, whose watchdog stops a test that hangs, names it and shows
/// every thread; Swift Testing's own time limit cannot end a test whose thread is blocked.
@Suite struct WatchdogTests {
    static let probe = "CLOUDSYNC_WATCHDOG_PROBE"

    /// Does nothing, except under the watchdog test below: then it blocks its thread for good, as a deadlock would.
    @Test func hangsWhenTheWatchdogTestAsks() {
        guard ProcessInfo.processInfo.environment[Self.probe] == "1" else { return }
        DispatchSemaphore(value: 0).wait()
    }

    // gdb reads the whole test binary's debug information before it prints a frame: a minute on a quiet machine of
    // two cores, several on a loaded one.
    @Test(.timeLimit(.minutes(10))) func aHungTestIsStoppedNamedAndItsThreadsShown() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        var environment = ProcessInfo.processInfo.environment
        environment[Self.probe] = "1"
        let result = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "python3", root + "/scripts/run-tests.py", "--binary", CommandLine.arguments[0], "--limit", "2",
                "--label", "watchdog-probe", "--", "--filter", "hangsWhenTheWatchdogTestAsks",
            ], environment: environment, currentDirectory: root)
        #expect(result.status == 1)
        #expect(
            result.standardError.contains(
                "1 test(s) ran longer than 2 s and were stopped:\n"
                    + "  CloudSyncTestingTests.WatchdogTests/hangsWhenTheWatchdogTestAsks()"), "\(result.standardError)"
        )
        #expect(result.standardError.contains("FAILED in"))
        let gdb = ["/usr/bin/gdb", "/bin/gdb"].contains { FileManager.default.isExecutableFile(atPath: $0) }
        guard gdb else { return }
        let line = try #require(
            result.standardError.split(separator: "\n").first { $0.contains("every thread's backtrace: ") })
        let path = String(line.split(separator: " ").last ?? "")
        let backtraces = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            backtraces.contains("WatchdogTests.hangsWhenTheWatchdogTestAsks()")
                && backtraces.contains("CloudSyncTestingTests/WatchdogTests.swift:"),
            "the hung test's frame, by name and line, is in \(path)")
    }
}
