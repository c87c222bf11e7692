import CloudSyncSQLite
import CloudSyncSodium
import CloudSyncYAML
import Foundation

/// The C libraries' Swift faces on their own, with no peer: figures to compare between runs (`make bench-compare`).
func benchFaces(_ context: BenchContext) async throws -> [BenchRow] {
    let directory = try context.directory("faces")
    let count = 100_000
    let value = String(repeating: "v", count: 100)
    var database: SQLiteDatabase?
    let insert = try await context.medianSeconds(
        prepare: { run in
            database = try SQLiteDatabase(path: "\(directory)/face-\(run).db")
            try database!.write { try $0.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)") }
        },
        measure: { _ in
            try database!.write { db in
                let insert = try db.prepare("INSERT INTO kv (key, value) VALUES (?, ?)")
                for index in 0..<count { try insert.bind("key.\(index)", value).run() }
            }
        })
    let key = SecretBytes.random(count: 32)
    let large = [UInt8](repeating: 7, count: 64 << 20)
    let seal = try await context.medianSeconds { _ in _ = try XChaCha20Poly1305.seal(large, key: key) }
    let hash = try await context.medianSeconds { _ in _ = SHA256.hash(large) }
    let argon = try await context.medianSeconds { _ in
        _ = try Argon2id.deriveKey(
            passphrase: SecretBytes(utf8: "benchmark"), salt: [UInt8](repeating: 1, count: 16), limits: .interactive)
    }
    var document = "items:\n"
    var items = 0
    while document.utf8.count < 1 << 20 {
        document += "  - { key: \"settings.item.\(items)\", value: 'value \(items)', size: \(items) }\n"
        items += 1
    }
    let yaml = try await context.medianSeconds { _ in
        guard try YAMLParser().parse(document)?["items"]?.sequence?.count == items else { fatalError("bad parse") }
    }
    return [
        BenchRow(
            measure: "SQLite face: insert 100,000 rows, one transaction", unit: "s", ours: insert, runs: context.runs),
        BenchRow(measure: "XChaCha20-Poly1305 seal 64 MiB", unit: "MiB/s", ours: 64 / seal, runs: context.runs),
        BenchRow(measure: "SHA-256 of 64 MiB", unit: "MiB/s", ours: 64 / hash, runs: context.runs),
        BenchRow(measure: "Argon2id, interactive limits", unit: "s", ours: argon, runs: context.runs),
        BenchRow(measure: "YAML: parse 1 MiB (\(items) flow mappings)", unit: "s", ours: yaml, runs: context.runs),
    ]
}
