import CloudSync
import CloudSyncTesting
import Foundation
import Testing

@testable import CloudSyncDeflate

/// The compressor and decompressor against each other and against zlib, an independent implementation of RFC 1951
/// (Python's `zlib` module), in both directions.
@Suite struct DeflateTests {
    let directory: TemporaryDirectory

    init() throws { directory = try TemporaryDirectory(prefix: "cloudsync-deflate") }

    @Test(arguments: [1, 2, 3] as [UInt64]) func everyInputComesBackAsItWas(seed: UInt64) throws {
        for input in DeflateCorpus.inputs(seed: seed) {
            let compressed = Deflate.compress(input.bytes)
            let restored = try Deflate.decompress(compressed, maxOutputBytes: input.bytes.count)
            #expect(restored == input.bytes, "\(input.name)")
        }
    }

    /// Input taken in pieces (a GiB each, so positions fit 32 bits) still makes one stream, whatever the cut.
    @Test func inputInPiecesMakesOneStream() throws {
        for input in DeflateCorpus.inputs(seed: 9) {
            for segment in [1_000, 5_000, 65_536] {
                let compressed = Deflate.compress(input.bytes, segmentBytes: segment)
                #expect(
                    try Deflate.decompress(compressed, maxOutputBytes: input.bytes.count) == input.bytes,
                    "\(input.name) in pieces of \(segment)")
            }
        }
    }

    /// zlib reads every stream written here, and this reads everything zlib writes, in every setting.
    ///
    /// zlib writes with each level, strategy and window size. Sizes are compared too: a weak match finder would still round-trip.
    @Test func zlibAgreesInBothDirections() async throws {
        let inputs = DeflateCorpus.inputs(seed: 7)
        for (index, input) in inputs.enumerated() {
            try Data(input.bytes).write(to: URL(fileURLWithPath: directory.file("\(index).raw")))
            try Data(Deflate.compress(input.bytes)).write(to: URL(fileURLWithPath: directory.file("\(index).ours")))
        }
        let result = try await ProcessRunner.run("/usr/bin/env", ["python3", "-c", Self.zlibSide, directory.path])
        #expect(result.status == 0, "\(result.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: [String: Any]])
        for (index, input) in inputs.enumerated() {
            let entry = try #require(report["\(index)"], "\(input.name)")
            #expect(entry["ours"] as? String == "same", "zlib read \(input.name) as: \(entry["ours"] ?? "")")
            let ours = try Data(contentsOf: URL(fileURLWithPath: directory.file("\(index).ours"))).count
            let zlibSize = try #require(entry["level6"] as? Int)
            #expect(ours <= zlibSize + zlibSize / 8 + 16, "\(input.name): \(ours) bytes beside zlib's \(zlibSize)")
            for name in try #require(entry["written"] as? [String]) {
                let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory.file(name))))
                #expect(
                    try Deflate.decompress(stream, maxOutputBytes: input.bytes.count) == input.bytes,
                    "\(input.name), zlib's \(name)")
            }
        }
    }

    /// Hexadecimal text has 4 bits of information a byte; short matches in it cost more than they save, so a block
    /// of literals under its own code must win. (The end-of-block code makes a 17th symbol, so one digit in 16 takes
    /// 5 bits: 0.508 is the floor.)
    @Test func hexadecimalTextTakesAboutFourBitsAByte() {
        let hex = DeflateCorpus.inputs(seed: 3).first { $0.name == "hexadecimal" }!.bytes
        let compressed = Deflate.compress(hex)
        #expect(Double(compressed.count) / Double(hex.count) < 0.51, "\(compressed.count) of \(hex.count)")
    }

    /// Stored, with 5 bytes of header for each block of symbols.
    @Test func incompressibleInputGrowsByLittle() {
        let random = DeflateCorpus.inputs(seed: 4).first { $0.name == "random" }!.bytes
        let blocks = random.count / DeflateEncoder.symbolsPerBlock + 1
        #expect(Deflate.compress(random).count <= random.count + blocks * 5 + 1)
    }

    @Test func moreOutputThanAllowedIsRefused() throws {
        let zeros = Deflate.compress([UInt8](repeating: 0, count: 1_000_000))
        #expect(try Deflate.decompress(zeros, maxOutputBytes: 1_000_000).count == 1_000_000)
        #expect(throws: DeflateError.self) { try Deflate.decompress(zeros, maxOutputBytes: 999_999) }
        let stored = Deflate.compress(DeflateCorpus.inputs(seed: 5).first { $0.name == "random" }!.bytes)
        #expect(throws: DeflateError.self) { try Deflate.decompress(stored, maxOutputBytes: 99_999) }
    }

    /// Every strict prefix of a stream is refused (the last byte always holds some of the final block), and damaged
    /// streams either throw or give some bytes within the limit; none crashes.
    @Test(arguments: [11, 12] as [UInt64]) func damagedStreamsAreRefusedNotTrusted(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        for input in DeflateCorpus.inputs(seed: seed) where input.bytes.count < 80_000 {
            let stream = Deflate.compress(Array(input.bytes.prefix(5_000)))
            for cut in Set((0..<40).map { _ in Int.random(in: 0..<stream.count, using: &random) }) {
                #expect(throws: DeflateError.self, "\(input.name) cut at \(cut)") {
                    try Deflate.decompress(Array(stream[0..<cut]), maxOutputBytes: 10_000)
                }
            }
            for _ in 0..<200 {
                var damaged = stream
                let bit = Int.random(in: 0..<(damaged.count * 8), using: &random)
                damaged[bit / 8] ^= 1 << (bit % 8)
                if let output = try? Deflate.decompress(damaged, maxOutputBytes: 10_000) {
                    #expect(output.count <= 10_000)
                }
            }
        }
        // A stream cut inside a run of literals ends as soon as the input does, not at a generous output limit.
        let text = Deflate.compress(DeflateCorpus.inputs(seed: seed).first { $0.name == "hexadecimal" }!.bytes)
        do {
            _ = try Deflate.decompress(Array(text.prefix(text.count / 2)), maxOutputBytes: 1 << 30)
            Issue.record("half a stream was accepted")
        } catch {
            #expect(error.message.contains("ends"), "\(error)")
        }
        for _ in 0..<2_000 {
            let noise = (0..<Int.random(in: 0..<64, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            if let output = try? Deflate.decompress(noise, maxOutputBytes: 100_000) { #expect(output.count <= 100_000) }
        }
    }

    /// Code lengths stay within DEFLATE's limits and form complete codes even for skewed frequencies, where an
    /// unlimited Huffman code would need more than 15 bits.
    @Test func codeLengthsAreLimitedAndComplete() {
        var fibonacci: [UInt32] = [1, 1]
        while fibonacci.count < 30 { fibonacci.append(fibonacci[fibonacci.count - 1] + fibonacci[fibonacci.count - 2]) }
        for limit in [7, 15] {
            let lengths = HuffmanCode.lengths(fibonacci, limit: limit)
            #expect(lengths.allSatisfy { $0 >= 1 && Int($0) <= limit })
            let kraft = lengths.reduce(0.0) { $0 + 1 / Double(1 << Int($1)) }
            #expect(kraft == 1.0, "limit \(limit): \(lengths)")
        }
        #expect(HuffmanCode.lengths([0, 5, 0], limit: 15) == [0, 1, 0])
        let lengths = HuffmanCode.lengths([3, 1, 1, 1], limit: 15)
        #expect(zip([3, 1, 1, 1], lengths).reduce(0) { $0 + $1.0 * Int($1.1) } == 11, "\(lengths)")
    }

    /// The zlib side: reads `N.ours` (reporting whether it decompresses to `N.raw`), and writes `N.*.z` with each
    /// level, strategy and window size, printing one JSON object.
    static let zlibSide = #"""
        import json, os, sys, zlib
        folder = sys.argv[1]
        report = {}
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".raw"):
                continue
            index = name[:-4]
            raw = open(os.path.join(folder, name), "rb").read()
            ours = open(os.path.join(folder, index + ".ours"), "rb").read()
            try:
                verdict = "same" if zlib.decompress(ours, -15) == raw else "different bytes"
            except zlib.error as error:
                verdict = str(error)
            written = []
            settings = [(level, zlib.Z_DEFAULT_STRATEGY, 15) for level in (0, 1, 6, 9)]
            settings += [(6, strategy, 15) for strategy in (zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_FIXED)]
            settings += [(9, zlib.Z_DEFAULT_STRATEGY, bits) for bits in (9, 12)]
            for level, strategy, bits in settings:
                packer = zlib.compressobj(level, zlib.DEFLATED, -bits, 9, strategy)
                stream = packer.compress(raw) + packer.flush()
                out = "%s.%d-%d-%d.z" % (index, level, strategy, bits)
                open(os.path.join(folder, out), "wb").write(stream)
                written.append(out)
            report[index] = {"ours": verdict, "level6": len(zlib.compress(raw, 6)) - 6, "written": written}
        print(json.dumps(report))
        """#
}
