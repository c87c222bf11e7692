import CloudSyncTesting
import Foundation
import Testing

/// `--report` and the pipeline's report paths onto what is not a plain file: a FIFO is written into, `/dev/null`
/// stays the device it is (runs as root under systemd and cron, and on this project's CI), a directory is refused.
@Suite struct ReportTargetTests {
    let executable: String
    let directory: TemporaryDirectory

    init() throws {
        executable = try ProcessRunner.builtProduct("cloudsync")
        directory = try TemporaryDirectory()
    }

    private func pipeline(report: String = "") throws -> String {
        let path = directory.file("p.yaml")
        try
            ("version: 1\nname: p\nstate: state\nproviders: { a: { type: memory, items: { k: v } } }\n"
            + "store: { providers: [a] }\njobs: [{ type: export, from: a, path: out/items.json }]\n" + report)
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func kind(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : 0
    }

    /// Reads a FIFO to its end on a thread of its own, off the concurrency pool: opening one blocks until a writer
    /// opens it too, and a few readers blocking pool threads stall every test on a two-core machine.
    private func drain(_ fifo: String) -> Task<String, Never> {
        Task {
            await offPool {
                let handle = FileHandle(forReadingAtPath: fifo)
                defer { try? handle?.close() }
                return String(decoding: handle?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            }
        }
    }

    @Test func aReportOntoAFIFOIsWrittenIntoThePipe() async throws {
        let fifo = directory.file("report.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let read = drain(fifo)
        let result = try await ProcessRunner.run(executable, ["run", try pipeline(), "--report", fifo])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try JSONSerialization.jsonObject(with: Data(await read.value.utf8)) as? [String: Any]
        #expect(report?["status"] as? String == "ok")
        #expect(kind(fifo) == S_IFIFO, "the FIFO was replaced")
    }

    @Test func theLatestReportAndAnExportOntoFIFOsStayFIFOs() async throws {
        let latest = directory.file("latest.fifo")
        let export = directory.file("out/items.json")
        try FileManager.default.createDirectory(atPath: directory.file("out"), withIntermediateDirectories: true)
        #expect(mkfifo(latest, 0o600) == 0 && mkfifo(export, 0o600) == 0)
        let (readLatest, readExport) = (drain(latest), drain(export))
        let result = try await ProcessRunner.run(
            executable, ["run", try pipeline(report: "report: { path: reports/r.json, latest: latest.fifo }\n")])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(await readLatest.value.contains("\"status\""))
        #expect(exportedItemsText(await readExport.value) == ["k": "v"])
        #expect(kind(latest) == S_IFIFO && kind(export) == S_IFIFO)
    }

    private func exportedItemsText(_ text: String) -> [String: String]? {
        let path = directory.file("copy.json")
        try? text.write(toFile: path, atomically: true, encoding: .utf8)
        return exportedItems(at: path)
    }

    @Test func aReportOntoDevNullLeavesTheDevice() async throws {
        var before = stat()
        #expect(stat("/dev/null", &before) == 0)
        let result = try await ProcessRunner.run(executable, ["run", try pipeline(), "--report", "/dev/null"])
        #expect(result.status == 0, "\(result.standardError)")
        var after = stat()
        #expect(stat("/dev/null", &after) == 0)
        #expect(after.st_mode & S_IFMT == S_IFCHR && after.st_rdev == before.st_rdev && after.st_mode == before.st_mode)
    }

    @Test func aReportOntoADirectoryIsRefusedAndPrintedInstead() async throws {
        let target = directory.file("reports")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let result = try await ProcessRunner.run(executable, ["run", try pipeline(), "--report", target])
        #expect(result.standardError.contains("\(target): it is a directory"), "\(result.standardError)")
        #expect(result.standardOutput.contains("\"status\""))
        #expect(kind(target) == S_IFDIR)
    }

    /// `keygen --out` a pipe writes the key into it (to hand it to a secret store) and never replaces the pipe; an
    /// existing regular file is still never overwritten.
    @Test func keygenOntoAFIFOWritesTheKeyIntoIt() async throws {
        let fifo = directory.file("key.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let read = drain(fifo)
        let result = try await ProcessRunner.run(executable, ["keygen", "--out", fifo])
        #expect(result.status == 0, "\(result.standardError)")
        let key = await read.value
        #expect(key.hasSuffix("\n") && Data(base64Encoded: String(key.dropLast()))?.count == 32)
        #expect(kind(fifo) == S_IFIFO)
        #expect(FileManager.default.createFile(atPath: directory.file("old.key"), contents: Data("kept\n".utf8)))
        let again = try await ProcessRunner.run(executable, ["keygen", "--out", directory.file("old.key")])
        #expect(again.status != 0)
        #expect(try String(contentsOfFile: directory.file("old.key"), encoding: .utf8) == "kept\n")
    }
}
