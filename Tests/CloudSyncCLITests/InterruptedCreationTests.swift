import CloudSyncTesting
import Foundation
import Testing

/// What a process killed while it created the state directory's files leaves behind still opens.
@Suite struct InterruptedCreationTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    private func pipeline() throws -> String {
        let path = directory.file("p.yaml")
        try
            ("version: 1\nname: p\nstate: state\nproviders: { a: { type: memory, items: { k: v } } }\n"
            + "store: { providers: [a] }\njobs: [{ type: export, from: a, path: out/items.json }]\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// State files without their tables read as empty.
    ///
    /// A kill while the state directory's files were being created left them without tables: `outbox list` and
    /// `--dry-run` exited 2 with `no such table`.
    @Test func filesLeftWithoutTheirTablesReadAsEmpty() async throws {
        let path = try pipeline()
        try FileManager.default.createDirectory(atPath: directory.file("state"), withIntermediateDirectories: true)
        for name in ["state.db", "outbox.db"] {
            #expect(FileManager.default.createFile(atPath: directory.file("state/" + name), contents: Data()))
        }
        let list = try await ProcessRunner.run(executable, ["outbox", "list", path])
        #expect(list.status == 0, "\(list.standardError)")
        let dry = try await ProcessRunner.run(executable, ["run", "--dry-run", path, "--report", "-"])
        #expect(dry.status == 0, "\(dry.standardError)")
    }
}
