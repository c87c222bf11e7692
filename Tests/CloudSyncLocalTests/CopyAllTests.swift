import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncLocal

#if canImport(Glibc)
    import Glibc
#endif

/// `LocalFiles.copyAll`, under the directory provider's files: the kernel copies between files, and a source it
/// cannot copy from (a pipe) goes through the buffer, byte for byte either way.
@Suite struct CopyAllTests {
    @Test func aFileIsCopiedWholeFromItsCurrentOffset() throws {
        let scratch = try TemporaryDirectory(prefix: "copy-all")
        let data = ProviderConformanceSuite.fileBytes(count: 3 * (1 << 20) + 5)
        try data.write(to: URL(fileURLWithPath: scratch.file("in")))
        let input = open(scratch.file("in"), O_RDONLY)
        let output = open(scratch.file("out"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            close(input)
            close(output)
        }
        // From where the source stands, as the provider's callers leave it (at the start).
        #expect(lseek(input, 5, SEEK_SET) == 5)
        #expect(try LocalFiles.copyAll(from: input, to: output).get() == Int64(data.count - 5))
        #expect(FileManager.default.contents(atPath: scratch.file("out")) == data.dropFirst(5))
    }

    @Test func aPipeGoesThroughTheBuffer() throws {
        let scratch = try TemporaryDirectory(prefix: "copy-all")
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let data = ProviderConformanceSuite.fileBytes(count: 40_000, start: 4)
        let writeEnd = ends[1]
        let writer = Thread {
            data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = write(writeEnd, bytes.baseAddress! + offset, bytes.count - offset)
                    if count <= 0 { break }
                    offset += count
                }
            }
            close(writeEnd)
        }
        writer.start()
        let output = open(scratch.file("out"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            close(ends[0])
            close(output)
        }
        #expect(try LocalFiles.copyAll(from: ends[0], to: output).get() == Int64(data.count))
        #expect(FileManager.default.contents(atPath: scratch.file("out")) == data)
    }
}
