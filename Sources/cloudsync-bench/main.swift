// `make bench`: one table — each measure beside its peer run in the same invocation, the ratio, the target and
// whether it is met — printed and written to bench.json; `make bench-compare OLD=old.json` sets two runs side by side.
//
//   cloudsync-bench [--runs N] [--json PATH] [--only TEXT]   run the benches (TEXT: only those whose name contains it)
//   cloudsync-bench compare OLD.json NEW.json                 compare two bench.json files
//
// Each bench is an independent function returning its rows; adding one is one line in `benches` below.
import Foundation

// `--sync SIZES` runs only the sync benchmark (SyncBenchmark.swift) and exits.
try await syncBenchmark(CommandLine.arguments)
// `--pipeline-child FILE [--join]`: a runner the shared-state bench starts (SharedStateBench.swift).
await pipelineChild(CommandLine.arguments)

let benches: [(name: String, run: (BenchContext) async throws -> [BenchRow])] = [
    ("sqlite-store", benchSQLiteStore),
    ("export", benchExport),
    ("outbox", benchOutbox),
    ("codec", benchCodec),
    ("directory-migrate", benchDirectoryMigrate),
    ("directory-listing", benchDirectoryListing),
    ("s3-migrate", benchS3Migrate),
    ("faces", benchFaces),
    ("requests", benchRequests),
    ("backup", benchBackup),
    ("sharded-migrate", benchShardedMigrate),
]

@MainActor func usage() -> Never {
    FileHandle.standardError.write(
        Data(
            ("usage: cloudsync-bench [--runs N] [--json PATH] [--only TEXT] | cloudsync-bench compare OLD.json NEW.json\n"
                + "benches: \(benches.map(\.name).joined(separator: ", "))\n").utf8))
    exit(64)
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "compare" {
    guard arguments.count == 3 else { usage() }
    print(BenchReport.comparison(old: try BenchReport.read(arguments[1]), new: try BenchReport.read(arguments[2])))
    exit(0)
}
var runs = 3
var jsonPath = "bench.json"
var only: String?
while !arguments.isEmpty {
    let option = arguments.removeFirst()
    guard let value = arguments.first else { usage() }
    arguments.removeFirst()
    switch option {
    case "--runs":
        guard let count = Int(value), count > 0 else { usage() }
        runs = count
    case "--json": jsonPath = value
    case "--only": only = value
    default: usage()
    }
}

let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-bench-\(getpid())")
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: scratch) }
let context = BenchContext(scratch: scratch, runs: runs)
var rows: [BenchRow] = []
for bench in benches where only.map({ bench.name.contains($0) }) ?? true {
    FileHandle.standardError.write(Data("bench: \(bench.name)…\n".utf8))
    rows += try await bench.run(context)
}
print(BenchReport.table(rows))
try BenchReport.write(rows, to: jsonPath)
print("written to \(jsonPath); compare a later run with: make bench-compare OLD=\(jsonPath)")
