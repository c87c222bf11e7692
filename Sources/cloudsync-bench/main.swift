// `make bench`: prints throughput figures for the layers built so far. Figures, not pass/fail: compare runs.
import CloudSync
import CloudSyncCrypto
import CloudSyncHTTP
import CloudSyncLocal
import CloudSyncS3
import CloudSyncSQLite
import CloudSyncSodium
import CloudSyncTesting
import CloudSyncYAML
import Foundation

// `--sync SIZES` runs only the sync benchmark (SyncBenchmark.swift) and exits.
try await syncBenchmark(CommandLine.arguments)

let clock = ContinuousClock()

func measure(_ label: String, operations: Int, unit: String = "ops", _ body: () throws -> Void) rethrows {
    let elapsed = try clock.measure(body)
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let rate = Double(operations) / seconds
    let padded = label.padding(toLength: 52, withPad: " ", startingAt: 0)
    print("\(padded) \(String(format: "%10.3f", seconds)) s  \(String(format: "%12.0f", rate)) \(unit)/s")
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-bench-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

// SQLite face: 100,000 rows of a 100-byte value, in one transaction, then read back by key.
let rowCount = 100_000
let value = String(repeating: "v", count: 100)
let database = try SQLiteDatabase(path: directory.appendingPathComponent("bench.db").path)
try database.write { try $0.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)") }
try measure("sqlite: insert 100,000 rows (one transaction)", operations: rowCount, unit: "rows") {
    try database.write { db in
        let insert = try db.prepare("INSERT INTO kv (key, value) VALUES (?, ?)")
        for index in 0..<rowCount { try insert.bind("key.\(index)", value).run() }
    }
}
try measure("sqlite: read 100,000 rows by key", operations: rowCount, unit: "rows") {
    try database.read { db in
        let select = try db.prepare("SELECT value FROM kv WHERE key = ?")
        for index in 0..<rowCount {
            try select.bind("key.\(index)")
            guard try select.step(), select.string(0)?.utf8.count == 100 else { fatalError("row \(index) missing") }
        }
    }
}

// Sodium face.
let key = SecretBytes.random(count: 32)
let small = Array(repeating: UInt8(7), count: 100)
try measure("xchacha20poly1305: seal+open 100,000 x 100 B", operations: rowCount, unit: "ops") {
    for _ in 0..<rowCount {
        let box = try XChaCha20Poly1305.seal(small, key: key, associatedData: [1, 2, 3])
        _ = try XChaCha20Poly1305.open(box, key: key, associatedData: [1, 2, 3])
    }
}
let large = Array(repeating: UInt8(7), count: 64 << 20)
try measure("xchacha20poly1305: seal 64 MiB", operations: 64, unit: "MiB") {
    _ = try XChaCha20Poly1305.seal(large, key: key)
}
measure("sha256: 64 MiB", operations: 64, unit: "MiB") { _ = SHA256.hash(large) }
try measure("argon2id: derive with interactive limits", operations: 1, unit: "keys") {
    _ = try Argon2id.deriveKey(
        passphrase: SecretBytes(utf8: "benchmark"), salt: Array(repeating: 1, count: 16), limits: .interactive)
}

// YAML face: a 1 MB document.
var document = "items:\n"
var itemCount = 0
while document.utf8.count < 1 << 20 {
    document += "  - { key: \"settings.item.\(itemCount)\", value: 'value \(itemCount)', size: \(itemCount) }\n"
    itemCount += 1
}
try measure("yaml: parse 1 MiB (\(itemCount) flow mappings)", operations: 1, unit: "docs") {
    guard try YAMLParser().parse(document)?["items"]?.sequence?.count == itemCount else { fatalError("bad parse") }
}

// Outbox: the cost of one durable enqueue (a write queued through the store against an offline provider, on disk
// with fsync before the call returns) with 100 and 10,000 entries already queued, beside the same single-row insert
// done directly with SQLite at the same durability (WAL, synchronous = FULL).
func outboxEnqueueMicroseconds(preloaded: Int, samples: Int) async throws -> Double {
    let path = directory.appendingPathComponent("outbox-\(preloaded).db").path
    _ = try SQLiteOutboxStorage(path: path)  // creates the schema
    try await SQLiteDatabase(path: path).write { db in
        let insert = try db.prepare(
            """
            INSERT INTO outbox (id, key, provider, operation, value, attempts, next_attempt_at_ms, enqueued_at_ms,
                                last_error_code) VALUES (?, ?, 'offline', 'set', ?, 1, 0, 0, 'ERR_OFFLINE')
            """)
        for index in 0..<preloaded { try insert.bind(index + 1, "preloaded.\(index)", value).run() }
    } as Void
    let provider = FaultInjectingProvider(id: "offline")
    provider.fail(.set, with: CloudSyncError(.offline, "benchmark"))
    var options = StoreOptions()
    options.outbox = try Outbox(
        storage: SQLiteOutboxStorage(path: path), limits: Outbox.Limits(maxEntries: 1_000_000))
    let store = try CloudStore(providers: [provider], options: options)
    let elapsed = try await clock.measure {
        for index in 0..<samples { try await store.set(value, forKey: "bench.\(index)") }
    }
    return Double(elapsed.components.attoseconds / 1_000_000_000_000 + elapsed.components.seconds * 1_000_000)
        / Double(samples)
}

func directInsertMicroseconds(preloaded: Int, samples: Int) throws -> Double {
    let path = directory.appendingPathComponent("direct-\(preloaded).db").path
    let database = try SQLiteDatabase(path: path, options: .init(durability: .powerLossSafe))
    try database.write { db in
        try db.executeScript("CREATE TABLE t (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value TEXT)")
        let insert = try db.prepare("INSERT INTO t (key, value) VALUES (?, ?)")
        for index in 0..<preloaded { try insert.bind("preloaded.\(index)", value).run() }
    }
    let elapsed = try clock.measure {
        for index in 0..<samples {
            try database.write { db in
                try db.execute("INSERT INTO t (key, value) VALUES (?, ?)", "bench.\(index)", value)
            }
        }
    }
    return Double(elapsed.components.attoseconds / 1_000_000_000_000 + elapsed.components.seconds * 1_000_000)
        / Double(samples)
}

for preloaded in [100, 10_000] {
    let samples = 200
    let outbox = try await outboxEnqueueMicroseconds(preloaded: preloaded, samples: samples)
    let direct = try directInsertMicroseconds(preloaded: preloaded, samples: samples)
    let label = "outbox: durable enqueue, \(preloaded) queued".padding(toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(label) \(String(format: "%8.0f", outbox)) µs  direct SQLite insert \(String(format: "%6.0f", direct)) µs  ratio \(String(format: "%.2f", outbox / direct))"
    )
}

// Local providers: 100,000 keys of 100 bytes through the store on the sqlite provider, beside the sqlite3 shell
// inserting and reading the same rows in one transaction; then the directory provider (10,000 keys: every write is
// a file, an fsync and a rename).
func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func shell(_ command: String) throws -> Duration {
    try clock.measure {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { fatalError("failed: \(command)") }
    }
}

let benchKeys = (0..<rowCount).map { String(format: "settings.item.%06d", $0) }
var storeOptions = StoreOptions()
storeOptions.timeout = nil
let sqliteStore = try CloudStore(
    providers: [try SQLiteProvider(path: directory.appendingPathComponent("store.db").path)], options: storeOptions)
let storeSet = try await clock.measure {
    for start in stride(from: 0, to: rowCount, by: 1000) {
        _ = try await sqliteStore.multiSet(benchKeys[start..<start + 1000].map { KeyValue($0, value) })
    }
}
let storeGet = try await clock.measure {
    for start in stride(from: 0, to: rowCount, by: 1000) {
        let values = try await sqliteStore.multiGet(Array(benchKeys[start..<start + 1000]))
        guard values.allSatisfy({ $0?.utf8.count == 100 }) else { fatalError("missing values") }
    }
}
let insertScript = directory.appendingPathComponent("insert.sql").path
let selectScript = directory.appendingPathComponent("select.sql").path
let shellDatabase = directory.appendingPathComponent("shell.db").path
try
    ("PRAGMA journal_mode=WAL;\nCREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, updated_at_ms INTEGER NOT NULL) WITHOUT ROWID;\nBEGIN;\n"
    + benchKeys.map { "INSERT INTO kv VALUES ('\($0)', '\(value)', 0);" }.joined(separator: "\n") + "\nCOMMIT;\n")
    .write(toFile: insertScript, atomically: true, encoding: .utf8)
try ("BEGIN;\n" + benchKeys.map { "SELECT value FROM kv WHERE key = '\($0)';" }.joined(separator: "\n") + "\nCOMMIT;\n")
    .write(toFile: selectScript, atomically: true, encoding: .utf8)
let shellSet = try shell("sqlite3 '\(shellDatabase)' < '\(insertScript)'")
let shellGet = try shell("sqlite3 '\(shellDatabase)' < '\(selectScript)'")
for (label, ours, theirs) in [("set", storeSet, shellSet), ("get", storeGet, shellGet)] {
    let padded = "sqlite provider via store: \(label) 100,000 x 100 B".padding(
        toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(padded) \(String(format: "%7.3f", seconds(ours))) s  sqlite3 shell \(String(format: "%6.3f", seconds(theirs))) s  ratio \(String(format: "%.2f", seconds(ours) / seconds(theirs)))"
    )
}

let directoryCount = 10_000
let directoryProvider = try DirectoryProvider(root: directory.appendingPathComponent("files").path)
let directoryStore = try CloudStore(providers: [directoryProvider], options: storeOptions)
let directorySet = try await clock.measure {
    for start in stride(from: 0, to: directoryCount, by: 1000) {
        _ = try await directoryStore.multiSet(benchKeys[start..<start + 1000].map { KeyValue($0, value) })
    }
}
let directoryGet = try await clock.measure {
    for start in stride(from: 0, to: directoryCount, by: 1000) {
        _ = try await directoryStore.multiGet(Array(benchKeys[start..<start + 1000]))
    }
}
for (label, duration) in [("set", directorySet), ("get", directoryGet)] {
    let padded = "directory provider via store: \(label) 10,000 x 100 B".padding(
        toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(padded) \(String(format: "%7.3f", seconds(duration))) s  \(String(format: "%10.0f", Double(directoryCount) / seconds(duration))) files/s"
    )
}

// The envelope codec: encode + decode through the codec beside a raw libsodium seal + open of the same bytes.
let envelopeCodec = try EnvelopeCodec(keys: [.raw(id: "bench", SecretBytes.random(count: 32))])
for (label, size, rounds) in [("1 KB", 1024, 20_000), ("1 MB", 1024 * 1024, 40)] {
    let plaintext = String(repeating: "v", count: size)
    let bytes = Array(plaintext.utf8)
    let codecTime = try clock.measure {
        for _ in 0..<rounds {
            let envelope = try envelopeCodec.encode(plaintext, key: "bench.key")
            guard try envelopeCodec.decode(envelope, key: "bench.key").utf8.count == size else { fatalError() }
        }
    }
    let rawTime = try clock.measure {
        for _ in 0..<rounds {
            let box = try XChaCha20Poly1305.seal(bytes, key: key, associatedData: Array("bench.key".utf8))
            guard try XChaCha20Poly1305.open(box, key: key, associatedData: Array("bench.key".utf8)).count == size
            else {
                fatalError()
            }
        }
    }
    let megabytes = Double(size * rounds) / 1_048_576
    let padded = "envelope codec: encode+decode \(label)".padding(toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(padded) \(String(format: "%8.1f", megabytes / seconds(codecTime))) MiB/s  raw seal+open \(String(format: "%8.1f", megabytes / seconds(rawTime))) MiB/s  ratio \(String(format: "%.2f", seconds(codecTime) / seconds(rawTime)))"
    )
}

// The s3 provider: a migrate of 2,000 files of 1 KB from a directory to a bucket of moto's S3 server on loopback,
// beside `rclone copy` of the same files to another bucket of the same server. One run each; moto (Python, one
// process) is the bottleneck of both, so the ratio says how CloudSync's requests compare with rclone's.
func benchS3(storeOptions: StoreOptions) async throws {
    let python = FileManager.default.currentDirectoryPath + "/.build/pyenv/bin/python3"
    guard FileManager.default.isExecutableFile(atPath: python),
        FileManager.default.isExecutableFile(atPath: "/usr/bin/rclone")
    else {
        print("s3 provider: skipped (needs .build/pyenv from scripts/python-env.sh and Debian's rclone)")
        return
    }
    let moto = Process()
    moto.executableURL = URL(fileURLWithPath: python)
    moto.arguments = ["scripts/moto_s3.py", "bench-cloudsync", "bench-rclone"]
    let input = Pipe()
    let output = Pipe()
    moto.standardInput = input
    moto.standardOutput = output
    moto.standardError = FileHandle.nullDevice
    try moto.run()
    defer {
        try? input.fileHandleForWriting.close()
        moto.waitUntilExit()
    }
    var line = Data()
    while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
        line += byte
    }
    guard let port = Int(String(decoding: line, as: UTF8.self)) else { fatalError("moto did not start") }
    let endpoint = URL(string: "http://127.0.0.1:\(port)")!

    let count = 2000
    let files = directory.appendingPathComponent("s3-source").path
    let source = try DirectoryProvider(id: "files", root: files)
    let kilobyte = String(repeating: "k", count: 1024)
    let keys = (0..<count).map { String(format: "settings.item.%06d", $0) }
    for start in stride(from: 0, to: count, by: 100) {
        _ = try await source.set(keys[start..<start + 100].map { KeyValue($0, kilobyte) })
    }
    let bucket = S3Provider(
        location: S3Location(endpoint: endpoint, bucket: "bench-cloudsync", region: "us-east-1", pathStyle: true),
        credentials: S3Credentials(accessKeyID: "bench", secretAccessKey: "bench"),
        transport: URLSessionTransport(maxConcurrency: 16), context: ProviderContext(providerID: "bucket"))
    let store = try CloudStore(providers: [source, bucket], options: storeOptions)
    var migrated = 0
    let ours = try await clock.measure {
        migrated = try await StoreMaintenance(store).migrate(from: "files", to: "bucket").copied.count
    }
    guard migrated == count else { fatalError("migrated \(migrated) of \(count)") }
    let environment = [
        "RCLONE_CONFIG_MOTO_TYPE": "s3", "RCLONE_CONFIG_MOTO_PROVIDER": "Other",
        "RCLONE_CONFIG_MOTO_ENDPOINT": endpoint.absoluteString, "RCLONE_CONFIG_MOTO_FORCE_PATH_STYLE": "true",
        "RCLONE_CONFIG_MOTO_ACCESS_KEY_ID": "bench", "RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY": "bench",
        "RCLONE_CONFIG_MOTO_REGION": "us-east-1", "RCLONE_CONFIG": "/dev/null",
    ]
    let exports = environment.map { "\($0.key)='\($0.value)'" }.joined(separator: " ")
    let theirs = try shell("env -u AWS_CA_BUNDLE \(exports) rclone copy --transfers 16 '\(files)' moto:bench-rclone")
    let padded = "s3 provider: migrate 2,000 x 1 KB dir -> moto".padding(toLength: 52, withPad: " ", startingAt: 0)
    print(
        "\(padded) \(String(format: "%7.3f", seconds(ours))) s  rclone copy \(String(format: "%6.3f", seconds(theirs))) s  ratio \(String(format: "%.2f", seconds(ours) / seconds(theirs)))"
    )
}
try await benchS3(storeOptions: storeOptions)
