import CloudSync
import CloudSyncTesting
import Foundation
import Testing

/// A sync killed with SIGKILL part of the way through leaves a snapshot the next run can trust.
@Suite struct SyncKillTests {
    @Test func aSyncKilledMidRunLeavesASnapshotTheNextRunsTrust() throws {
        let executable = try ProcessRunner.builtProduct("cloudsync")
        let directory = try TemporaryDirectory()
        let count = 2500
        let items = (0..<count).map { "      k\($0): v\($0)\n" }.joined()
        let file = directory.file("killed.yaml")
        try
            ("version: 1\nname: killed\nproviders:\n  seed:\n    type: memory\n    items:\n\(items)"
            + "  files: { type: directory, path: data/files, create: true }\n"
            + "store:\n  providers: [seed, files]\njobs:\n  - { type: sync, name: nightly, maxDeletes: 10 }\n")
            .write(toFile: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["run", file, "--quiet", "--report", directory.file("killed.json")]
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Past the first page (1,000 keys, whose snapshot rows commit after its writes), then SIGKILL.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline,
            ((try? FileManager.default.contentsOfDirectory(atPath: directory.file("data/files")))?.count ?? 0) < 1300
        {
            usleep(1000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)

        /// Key files, leaving out a temporary file the killed write may have left.
        func keyFiles() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: directory.file("data/files")).filter {
                !$0.hasPrefix(".")
            }.count
        }
        func run() throws -> [String: Any] {
            let result = try ProcessRunner.run(executable, ["run", file, "--report", "-", "--quiet"])
            #expect(result.status == 0, "\(result.standardError)")
            let report = try #require(
                try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
            return try #require((report["jobs"] as? [[String: Any]])?.first)
        }
        #expect(try keyFiles() < count, "the run was killed before it finished")
        // The next run finishes the copy and deletes nothing.
        let resumed = try run()
        #expect((resumed["counts"] as? [String: Int])?["deleted"] == 0)
        #expect((resumed["sync"] as? [String: Any])?["firstRun"] as? Bool == true, "the killed run never finished")
        #expect(try keyFiles() == count)
        // A deletion after that propagates: exactly the deleted keys, none of those the killed run touched.
        for index in [3, 1100, 2400] {
            try FileManager.default.removeItem(atPath: directory.file("data/files/k\(index)"))
        }
        let after = try run()
        #expect((after["counts"] as? [String: Int])?["deleted"] == 3)
        #expect((after["sync"] as? [String: Any])?["deletions"] as? [String] == ["k1100", "k2400", "k3"])
    }
}
