import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation
import Testing

/// Temporary files a killed write left behind (`.tmp-*`, at any depth) are removed when a provider opens, if they
/// are older than the run; a fresh one (another process writing now) and everything else stay.
@Suite struct DirectoryTemporaryFileTests {
    @Test func staleTemporaryFilesGoWhenTheProviderOpens() throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("data")
        try FileManager.default.createDirectory(atPath: root + "/nested/deeper", withIntermediateDirectories: true)
        let old = Date(timeIntervalSinceNow: -3600)
        let stale = [root + "/.tmp-0011223344556677", root + "/nested/deeper/.tmp-8899aabbccddeeff"]
        for path in stale {
            try "half a value".write(toFile: path, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
        // Written after this run started: another process's write in progress.
        let fresh = root + "/nested/.tmp-ffeeddccbbaa9988"
        try "being written".write(toFile: fresh, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: 60)], ofItemAtPath: fresh)
        let kept = [root + "/key", root + "/.hidden-by-someone", fresh]
        for path in kept.dropLast() {
            try "v".write(toFile: path, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
        _ = try DirectoryProvider(id: "files", root: root)
        for path in stale { #expect(!FileManager.default.fileExists(atPath: path), "\(path)") }
        for path in kept { #expect(FileManager.default.fileExists(atPath: path), "\(path)") }
    }

    @Test func onlyStaleRegularFilesWithATemporaryNameGo() throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("data")
        let outside = directory.file("outside")
        try FileManager.default.createDirectory(atPath: root + "/+piece", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let old = Date(timeIntervalSinceNow: -3600)
        func write(_ path: String) throws {
            try "v".write(toFile: path, atomically: false, encoding: .utf8)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: path)
        }
        let stale = root + "/+piece/.tmp-00000000000000ff"
        try write(stale)
        // Names a digit or a letter off a temporary name, a temporary name in upper case, a link (not followed, not
        // removed) and a directory with a temporary name (entered: a stale file in it goes).
        let kept = [
            root + "/.tmp-00000000000000f", root + "/.tmp-00000000000000fff", root + "/.tmp-00000000000000FF",
            root + "/.tmp-0000000000000g00", root + "/tmp-0000000000000000", outside + "/.tmp-0000000000000001",
        ]
        for path in kept { try write(path) }
        try FileManager.default.createSymbolicLink(
            atPath: root + "/.tmp-0000000000000002", withDestinationPath: outside + "/.tmp-0000000000000001")
        try FileManager.default.createDirectory(
            atPath: root + "/.tmp-0000000000000003", withIntermediateDirectories: false)
        let inside = root + "/.tmp-0000000000000003/.tmp-0000000000000004"
        try write(inside)
        _ = try DirectoryProvider(id: "files", root: root)
        for path in [stale, inside] { #expect(!FileManager.default.fileExists(atPath: path), "\(path)") }
        for path in kept + [root + "/.tmp-0000000000000002", root + "/.tmp-0000000000000003"] {
            #expect((try? FileManager.default.attributesOfItem(atPath: path)) != nil, "\(path)")
        }
    }

    @Test func aDryRunOpenRemovesNothing() throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("data")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let stale = root + "/.tmp-0011223344556677"
        try "half a value".write(toFile: stale, atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: stale)
        _ = try DirectoryProvider(id: "files", root: root, removesStaleTemporaryFiles: false)
        #expect(FileManager.default.fileExists(atPath: stale))
    }
}
