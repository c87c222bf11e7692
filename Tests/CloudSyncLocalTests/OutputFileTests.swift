import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Where a report or an export goes: regular files are replaced atomically; devices and FIFOs are written in place
/// and stay what they are; directories, disks and sockets are refused.
@Suite struct OutputFileTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    private func kind(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : 0
    }

    @Test func aFIFOIsWrittenInPlaceAndStaysAFIFO() async throws {
        let fifo = directory.file("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        // Reader and writer on threads of their own, off the concurrency pool: opening a FIFO blocks until both ends
        // are open, and blocked pool threads stall every other test.
        let read = Task {
            await offPool { () -> String in
                let handle = FileHandle(forReadingAtPath: fifo)
                defer { try? handle?.close() }
                return String(decoding: handle?.readDataToEndOfFile() ?? Data(), as: UTF8.self)
            }
        }
        try await offPool { try OutputFile.write("{\"status\":\"ok\"}\n", to: fifo, what: "the report") }
        #expect(await read.value == "{\"status\":\"ok\"}\n")
        #expect(kind(fifo) == S_IFIFO)
    }

    /// Only ever in place: the test runs as root on CI, where a rename over `/dev/null` would replace it.
    @Test func aCharacterDeviceIsWrittenInPlaceAndKeepsItsMode() throws {
        var before = stat()
        #expect(stat("/dev/null", &before) == 0)
        try OutputFile.write("a report nobody keeps\n", to: "/dev/null", mode: 0o600, what: "the report")
        var after = stat()
        #expect(stat("/dev/null", &after) == 0)
        #expect(after.st_mode == before.st_mode && after.st_rdev == before.st_rdev && after.st_ino == before.st_ino)
        #expect(after.st_mode & S_IFMT == S_IFCHR)
    }

    @Test func aDirectoryIsRefusedNamingIt() throws {
        let error = #expect(throws: CloudSyncError.self) {
            try OutputFile.write("x", to: directory.path, what: "the report")
        }
        #expect(error?.code == .config)
        #expect(error?.message.contains("\(directory.path): it is a directory") == true)
    }

    @Test func aBlockDeviceIsRefused() throws {
        let devices = (try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? []
        guard let disk = devices.map({ "/dev/" + $0 }).first(where: { kind($0) == S_IFBLK }) else { return }
        let error = #expect(throws: CloudSyncError.self) { try OutputFile.write("x", to: disk, what: "the report") }
        #expect(error?.message.contains("block device") == true)
    }

    @Test func aRegularFileIsReplacedWithTheModeAskedFor() throws {
        let path = directory.file("out/export.json")
        try OutputFile.write("old", to: path, what: "the export file")
        #expect(chmod(path, 0o644) == 0)
        try OutputFile.write("new", to: path, mode: 0o600, what: "the export file")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new")
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("out")) == ["export.json"])
    }

    @Test func aSymlinkToARegularFileStaysASymlink() throws {
        let target = directory.file("reports/real.json")
        try OutputFile.write("old", to: target, what: "the report")
        let link = directory.file("latest.json")
        #expect(symlink(target, link) == 0)
        try OutputFile.write("new", to: link, what: "the latest report")
        #expect(kind(link) == S_IFLNK)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "new")
    }
}
