import CloudSync
import CloudSyncCrypto
import CloudSyncHTTPServer
import CloudSyncJobs
import CloudSyncPipeline
import CloudSyncRunner
import CloudSyncSodium
import CloudSyncYAML
import CloudSyncZlib
import CloudSyncZstd
import Foundation

/// The inputs a stranger can hand CloudSync, each as one entry point that takes arbitrary bytes: libFuzzer drives
/// them in `cloudsync-fuzz` (`make fuzz`), and the test suite replays the kept corpus (`Tests/Fuzz/<entry>/`)
/// through the same functions.
///
/// An entry point returns for every input; errors are the expected answer to bad input. A crash, a trap or a
/// sanitizer report is a bug.
package enum FuzzEntry: String, CaseIterable, Sendable {
    /// The YAML face: bytes parsed into a node tree, and any error rendered against the source.
    case yaml
    /// The pipeline loader and compiler, then the plan of a pipeline that loads.
    case pipeline
    /// The envelope decoder of the encrypting codec, under a key ring of raw keys.
    case envelope
    /// The export file reader (what `import` reads), plain or sealed under the same ring; what it accepts must
    /// survive being written again and read back.
    case export
    /// The decompressors backup repositories open objects with, zlib's raw inflate (format 2) and zstd (format 3), each
    /// under a bound it must keep; what zstd accepts must compress and decompress back to itself.
    case inflate
    /// The loopback HTTP server's request parser (the emulators', the sign-in redirect's): the bytes a client sends,
    /// received in pieces whose size the first byte picks; no request read may hold more than the limits allow.
    case http

    /// Runs the entry point on `bytes`.
    package func run(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        switch self {
        case .yaml: Self.parse(text)
        case .pipeline: Self.load(text)
        case .envelope: Self.decode(text)
        case .export: Self.readExport(Array(bytes))
        case .inflate: Self.inflate(Array(bytes))
        case .http: Self.readHTTP(Array(bytes))
        }
    }

    /// Runs the entry point on `data`.
    package func run(_ data: Data) {
        data.withUnsafeBytes { run($0) }
    }

    /// Inputs to start from, written for this entry point: the fuzzer begins with them (beside the kept corpus) and
    /// the test suite replays them.
    package var seeds: [Data] {
        switch self {
        case .yaml:
            return [
                "version: 1\nname: demo\n", "a: &x [1, 2, { b: c }]\nd: *x\n", "- |\n  text\n- >-\n  folded\n",
                "---\na\n---\nb\n", "k: !!str 1\n'q': \"\\u00e9\\t\"\n", "{ a: [ { b: { c: [] } } ] }",
            ].map { Data($0.utf8) }
        case .pipeline:
            let pipeline = """
                version: 1
                name: fuzz
                state: state
                codecs:
                  vault:
                    type: xchacha20poly1305
                    allowPlaintext: true
                    keys: [{ id: k1, env: FUZZ }, { id: k2, passphrase: { env: FUZZ } }, { id: k3, file: k.key }]
                providers:
                  seed: { type: memory, items: { a: '${env:FUZZ}', b: '${env:MISSING:-x}' } }
                  local: { type: sqlite, path: data/local.db, create: true, maxBytes: 65536, codec: vault }
                  files: { type: directory, path: '${env:FUZZ}/files' }
                  bucket: { type: s3, bucket: b, endpoint: 'http://127.0.0.1:9', region: auto }
                  drive: { type: googleDrive, accessToken: '${file:token}' }
                  cloud: { type: cloudKit, container: iCloud.x, apiToken: t, recordMaxBytes: 1024 }
                store:
                  providers: [local, files]
                  writeMode: mirror
                  tiering: { kvMaxBytes: 10, recordMaxBytes: 20 }
                  resolver: { type: timestamp, field: updatedAt }
                  outbox: { enabled: true, maxEntries: 5 }
                  codec: vault
                jobs:
                  - { type: sync, providers: [local] }
                  - { type: migrate, from: seed, to: local, keys: ['a*', 'b?[!c]'], overwrite: ifMissing }
                  - { type: export, from: store, path: 'out/{name}.json', codec: vault }
                  - { type: import, path: in.json, to: store }
                  - { type: clear, provider: all, confirm: true }
                  - { type: quota, warnAbove: 0.5 }
                  - { type: verify, provider: local }
                  - { type: rekey, provider: local }
                  - { type: flush }
                report: { path: 'r/{startedAt}.json', keep: 3 }

                """
            return [pipeline, "version: 1\nname: m\nproviders: { a: { type: memory } }\nstore: { providers: [a] }\n"]
                .map { Data($0.utf8) }
        case .envelope:
            var seeds = ["fuzz\nplain text", "k\ncs1:current:raw:AAAA", "k\ncs1:x:argon2id13.1.8192.AAAA:AAAA"]
            for (key, value) in [("k", "hello"), ("settings.theme", ""), ("é", String(repeating: "v", count: 300))] {
                if let sealed = try? Self.codec.encode(value, key: key) { seeds.append("\(key)\n\(sealed)") }
            }
            return seeds.map { Data($0.utf8) }
        case .export:
            let items = [
                KeyValue("a", "1"), KeyValue("b\"\\", "\u{1}é😀"), KeyValue("café", "x"), KeyValue("cafe\u{301}", "y"),
            ].sorted {
                StoreKey.bytesPrecede($0.key, $1.key)
            }
            let path = FileManager.default.temporaryDirectory.path + "/cloudsync-fuzz-seed-\(getpid()).json"
            defer { unlink(path) }
            var seeds = [
                #"{"version": 1, "items": {"a": "1", "b": "\u00e9\ud83d\ude00"}}"#,
                #"{"items": [{"value": "v", "key": "k"}], "count": 1, "version": 2}"#,
            ].map { Data($0.utf8) }
            for sealed in [false, true] {
                if (try? ExportFile.write(items, to: path, codec: sealed ? Self.codec : nil)) != nil,
                    let data = FileManager.default.contents(atPath: path)
                {
                    seeds.append(data)
                }
            }
            return seeds
        case .http:
            // The first byte picks the piece size; the rest is what a client sends.
            let heads = [
                "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a?b=c%20d HTTP/1.1\r\nConnection: close\r\n\r\n",
                "POST /x HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc",
                "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;e=1\r\nabc\r\n0\r\nT: 1\r\n\r\n",
                "POST /api/pipelines/x/run HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc",
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7ffffffffffffffe\r\nabc",
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc",
                "POST / HTTP/1.1\r\nContent-Length: 1610612736\r\n\r\nabc",
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                "GET http://h:1/p?q HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            ]
            return heads.enumerated().map { index, text in Data([UInt8(index * 37 % 256)] + Array(text.utf8)) }
        case .inflate:
            let texts = ["", "a", String(repeating: "abc", count: 100), #"{"k":"v","k2":"v"}"#, "0123456789abcdef"]
            // zstd frames of each text; the kept corpus holds DEFLATE streams of every block type. Then the empty
            // stream in DEFLATE's fixed code, and a stored block whose length check fails.
            return texts.map { Data(Zstd.compress(Array($0.utf8))) } + [Data([0x03, 0x00]), Data([0x01, 0x00, 0x00])]
        }
    }

    /// Small limits, so the fuzzer reaches them with short inputs.
    private static let httpLimits = HTTPRequestLimits(headBytes: 2048, bodyBytes: 4096)

    private static func readHTTP(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let (requests, _) = readRequests(from: Array(bytes.dropFirst()), pieceSize: Int(first) + 1, limits: httpLimits)
        for request in requests where request.body.count > httpLimits.bodyBytes {
            preconditionFailure("a request was read with a body of \(request.body.count) bytes, past the limit")
        }
    }

    private static func inflate(_ bytes: [UInt8]) {
        if let output = try? RawInflate.inflate(bytes, maxOutputBytes: 1 << 20), output.count > 1 << 20 {
            preconditionFailure("zlib's inflate passed its output limit")
        }
        guard let output = try? Zstd.decompress(bytes, maxOutputBytes: 1 << 20) else { return }
        guard output.count <= 1 << 20 else { preconditionFailure("zstd passed its output limit") }
        guard (try? Zstd.decompress(Zstd.compress(output), maxOutputBytes: output.count)) == output else {
            preconditionFailure("decompressed bytes did not survive compressing and decompressing again")
        }
    }

    private static func readExport(_ bytes: [UInt8]) {
        guard let items = try? ExportFile.items(of: bytes, codecs: [codec]) else { return }
        let path = FileManager.default.temporaryDirectory.path + "/cloudsync-fuzz-export-\(getpid()).json"
        defer { unlink(path) }
        let sorted = items.sorted { StoreKey.bytesPrecede($0.key, $1.key) }
        for sealed in [false, true] {
            do {
                try ExportFile.write(sorted, to: path, codec: sealed ? codec : nil)
                let back = try ExportFile.items(
                    of: Array(try Data(contentsOf: URL(fileURLWithPath: path))), codecs: [codec])
                guard back == sorted else { preconditionFailure("an export file did not read back as it was written") }
            } catch {
                preconditionFailure("an export file that was read could not be written and read again: \(error)")
            }
        }
    }

    private static func parse(_ text: String) {
        do {
            _ = try YAMLParser(maximumNodes: 10_000, maximumDepth: 64).parse(text)
        } catch {
            _ = error.rendered(file: "fuzz.yaml", source: text)
        }
    }

    private static func load(_ text: String) {
        do {
            let spec = try PipelineLoader.load(
                source: text, file: "fuzz.yaml", directory: "/nonexistent/cloudsync-fuzz",
                registry: BuiltInProviders.registry, environment: ["FUZZ": "value", "EMPTY": ""])
            let compiled = try PipelineCompiler.compile(spec, environment: ["FUZZ": "value"])
            _ = PipelinePlan(compiled).text()
            _ = compiled.storeOptions
        } catch {
            _ = error.description
        }
    }

    /// Two raw keys (fixed bytes: the fuzzer must be able to reach the decryption itself) and plaintext allowed.
    private static let codec: EnvelopeCodec = {
        do {
            return try EnvelopeCodec(
                keys: [
                    .raw(id: "current", SecretBytes(copying: [UInt8](repeating: 7, count: 32))),
                    .raw(id: "old", SecretBytes(copying: [UInt8](repeating: 9, count: 32))),
                ], allowPlaintext: false)
        } catch {
            preconditionFailure("the fuzzing key ring is valid: \(error)")
        }
    }()

    private static func decode(_ text: String) {
        // The first line names the store key the envelope is bound to; the rest is the stored value.
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let storeKey = parts.count == 2 ? String(parts[0]) : "fuzz"
        let stored = parts.count == 2 ? String(parts[1]) : text
        if let plain = try? codec.decode(stored, key: storeKey) {
            // What opens must be what was sealed: encoding it again and decoding gives the same text.
            guard let again = try? codec.encode(plain, key: storeKey),
                (try? codec.decode(again, key: storeKey)) == plain
            else { preconditionFailure("a decoded value did not survive encoding again") }
        }
        _ = codec.isCurrent(stored)
    }
}
