import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncZstd

/// Inputs of the kinds backups compress: empty, tiny, text that repeats, JSON, random bytes, and one larger than a pack.
enum CompressionInputs {
    static func all(seed: UInt64) -> [(name: String, bytes: [UInt8])] {
        var random = SeededRandom(seed: seed)
        let json = (0..<2_000).map { #"{"id":\#($0),"theme":"dark","tags":["a","b"]}"# }.joined(separator: ",")
        return [
            ("empty", []), ("one byte", [0x61]),
            ("repeated text", Array(String(repeating: "settings.theme=dark; ", count: 5_000).utf8)),
            ("json", Array(json.utf8)),
            ("random 1 KB", (0..<1_024).map { _ in UInt8.random(in: 0...255, using: &random) }),
            ("random 300 KB", (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }),
            ("zeros 5 MiB", [UInt8](repeating: 0, count: 5 << 20)),
        ]
    }
}

/// libzstd's face against itself, at its bounds, and against the `zstandard` package (its own build of the library,
/// writing frames with options this face never uses: no declared size, checksums, several frames in a row).
@Suite struct ZstdTests {
    @Test(arguments: [1, 2] as [UInt64]) func everyInputComesBackAsItWasAtEveryLevel(seed: UInt64) throws {
        for input in CompressionInputs.all(seed: seed) {
            for level in [Zstd.levels.lowerBound, -1, 1, Zstd.defaultLevel, 9] {
                let frame = Zstd.compress(input.bytes, level: level)
                #expect(
                    try Zstd.decompress(frame, maxOutputBytes: input.bytes.count) == input.bytes,
                    "\(input.name) at level \(level)")
            }
        }
    }

    /// A frame declaring more than the bound is refused from its header, before anything is allocated for it.
    @Test func aFrameHoldingMoreThanTheBoundIsRefused() throws {
        let frame = Zstd.compress([UInt8](repeating: 7, count: 2 << 20))
        #expect(frame.count < 1_000)
        #expect(throws: ZstdError.tooLarge(limit: 1 << 20)) { try Zstd.decompress(frame, maxOutputBytes: 1 << 20) }
        #expect(try Zstd.decompress(frame, maxOutputBytes: 2 << 20).count == 2 << 20)
    }

    /// Cut anywhere, a frame is refused: never a crash, never a shorter answer taken for the whole.
    @Test func aFrameCutShortIsRefusedWherever() throws {
        let input = CompressionInputs.all(seed: 3)[3].bytes
        let frame = Zstd.compress(input)
        for end in Set([0, 1, 4, 5, 9, frame.count / 2, frame.count - 4, frame.count - 1]) {
            #expect(throws: ZstdError.self, "cut at \(end) of \(frame.count)") {
                try Zstd.decompress(Array(frame[..<end]), maxOutputBytes: input.count)
            }
        }
        #expect(throws: ZstdError.notZstd) { try Zstd.decompress(Array("plain text".utf8), maxOutputBytes: 100) }
    }

    @Test func theZstandardPackageReadsOurFramesAndWeReadAllOfItsKinds() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudsync-zstd")
        let inputs = CompressionInputs.all(seed: 4)
        for (index, input) in inputs.enumerated() {
            try Data(input.bytes).write(to: URL(fileURLWithPath: directory.file("\(index).raw")))
            try Data(Zstd.compress(input.bytes)).write(to: URL(fileURLWithPath: directory.file("\(index).ours")))
        }
        guard FileManager.default.isExecutableFile(atPath: Repository.python) else {
            Issue.record("the tests' Python environment is missing: run `make test`, which creates it")
            return
        }
        let result = try await ProcessRunner.run(Repository.python, ["-c", Self.zstandardSide, directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardOutput == String(repeating: "same\n", count: inputs.count), "\(result.standardOutput)")
        for (index, input) in inputs.enumerated() {
            for kind in ["sized", "unsized", "checked", "two"] {
                let frames = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.file("\(index).\(kind)"))))
                let expected = kind == "two" ? input.bytes + input.bytes : input.bytes
                #expect(
                    try Zstd.decompress(frames, maxOutputBytes: expected.count) == expected, "\(input.name), \(kind)")
                if !expected.isEmpty {
                    #expect(throws: ZstdError.self, "\(input.name), \(kind), one byte short of room") {
                        try Zstd.decompress(frames, maxOutputBytes: expected.count - 1)
                    }
                }
            }
        }
    }

    /// Reads `N.ours` (printing whether it holds `N.raw`), and writes `N.raw` as frames with and without a declared
    /// size, with a checksum, and as two frames in a row.
    static let zstandardSide = #"""
        import os, sys, zstandard
        directory = sys.argv[1]
        index = 0
        while os.path.exists(os.path.join(directory, "%d.raw" % index)):
            path = lambda suffix: os.path.join(directory, "%d.%s" % (index, suffix))
            raw = open(path("raw"), "rb").read()
            ours = zstandard.ZstdDecompressor().decompress(open(path("ours"), "rb").read())
            print("same" if ours == raw else "differs")
            unsized = zstandard.ZstdCompressor(level=5, write_content_size=False).compressobj()
            kinds = {
                "sized": zstandard.ZstdCompressor(level=19).compress(raw),
                "unsized": unsized.compress(raw) + unsized.flush(),
                "checked": zstandard.ZstdCompressor(level=1, write_checksum=True).compress(raw),
                "two": zstandard.ZstdCompressor().compress(raw) * 2,
            }
            for kind, frames in kinds.items():
                open(path(kind), "wb").write(frames)
            index += 1
        """#
}
