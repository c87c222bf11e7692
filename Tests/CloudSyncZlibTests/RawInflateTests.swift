import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncZlib

/// zlib's raw inflate, fed what Python's `zlib` writes at every level and strategy (format 2 objects were written by
/// a DEFLATE of this project's own, which the format 2 fixture's tests cover), at its bounds and cut short.
@Suite struct RawInflateTests {
    static func inputs() -> [(name: String, bytes: [UInt8])] {
        var random = SeededRandom(seed: 5)
        let json = (0..<2_000).map { #"{"id":\#($0),"theme":"dark"}"# }.joined(separator: ",")
        return [
            ("empty", []), ("one byte", [0x61]),
            ("repeated text", Array(String(repeating: "settings.theme=dark; ", count: 5_000).utf8)),
            ("json", Array(json.utf8)),
            ("random 300 KB", (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }),
        ]
    }

    @Test func everyStreamZlibWritesIsReadBackAsItWas() async throws {
        let directory = try TemporaryDirectory(prefix: "cloudsync-inflate")
        let inputs = Self.inputs()
        for (index, input) in inputs.enumerated() {
            try Data(input.bytes).write(to: URL(fileURLWithPath: directory.file("\(index).raw")))
        }
        let result = try await ProcessRunner.run("/usr/bin/env", ["python3", "-c", Self.zlibSide, directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let written = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".z") }
        #expect(written.count == inputs.count * 10 * 3)
        for name in written {
            let input = inputs[Int(name.split(separator: ".")[0])!]
            let stream = try [UInt8](Data(contentsOf: URL(fileURLWithPath: directory.file(name))))
            #expect(try RawInflate.inflate(stream, maxOutputBytes: input.bytes.count) == input.bytes, "\(name)")
            if !input.bytes.isEmpty {
                #expect(throws: InflateError.tooLarge(limit: input.bytes.count - 1), "\(name)") {
                    try RawInflate.inflate(stream, maxOutputBytes: input.bytes.count - 1)
                }
            }
            for end in Set([0, stream.count / 2, stream.count - 1]) where end < stream.count {
                #expect(throws: InflateError.self, "\(name) cut at \(end)") {
                    try RawInflate.inflate(Array(stream[..<end]), maxOutputBytes: input.bytes.count)
                }
            }
            #expect(throws: InflateError.damaged("bytes follow the end of the stream"), "\(name)") {
                try RawInflate.inflate(stream + [0], maxOutputBytes: input.bytes.count + 1)
            }
        }
    }

    /// Writes each `N.raw` as raw DEFLATE (window bits -15) at levels 0–9, each with the default, filtered and
    /// Huffman-only strategies, as `N.<level>.<strategy>.z`.
    static let zlibSide = #"""
        import os, sys, zlib
        directory = sys.argv[1]
        index = 0
        while os.path.exists(os.path.join(directory, "%d.raw" % index)):
            raw = open(os.path.join(directory, "%d.raw" % index), "rb").read()
            for level in range(10):
                for strategy in (zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY):
                    compressor = zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)
                    stream = compressor.compress(raw) + compressor.flush()
                    open(os.path.join(directory, "%d.%d.%d.z" % (index, level, strategy)), "wb").write(stream)
            index += 1
        """#
}
