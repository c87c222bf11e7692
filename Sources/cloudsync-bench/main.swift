// `make bench`: one table — each measure beside its peer run in the same invocation, the ratio, the target and
// whether it is met — printed and written to bench.json; `make bench-compare OLD=old.json` sets two runs side by side.
//
//   cloudsync-bench [--runs N] [--json PATH] [--only TEXT]   run the benches (TEXT: only those whose name contains it,
//                                                             or any of several, separated by commas)
//   cloudsync-bench compare OLD.json NEW.json                 compare two bench.json files
//
// Each bench is an independent function returning its rows; adding one is one line in `benches` below.
import CloudSyncRunner
import Foundation
@preconcurrency import Glibc

// As the `cloudsync` binary does, so the children it starts run as the binary would.
ProcessMemory.returnLargeBuffersToTheSystem()
// `--sync SIZES` runs only the sync benchmark (SyncBenchmark.swift) and exits.
try await syncBenchmark(CommandLine.arguments)
// `--pipeline-child FILE [--join] [--print-report]`: a runner the shared-state and migrate re-run benches start
// (SharedStateBench.swift).
await pipelineChild(CommandLine.arguments)
// `--file-child put|get PATH ROOT`: one file transfer the file bench starts (FileBench.swift).
await fileChild(CommandLine.arguments)

let benches: [(name: String, run: (BenchContext) async throws -> [BenchRow])] = [
    ("sqlite-store", benchSQLiteStore),
    ("export", benchExport),
    ("outbox", benchOutbox),
    ("codec", benchCodec),
    ("directory-migrate", benchDirectoryMigrate),
    ("directory-listing", benchDirectoryListing),
    ("s3-migrate", benchS3Migrate),
    ("migrate-rerun", benchMigrateRerun),
    ("faces", benchFaces),
    ("requests", benchRequests),
    ("backup", benchBackup),
    ("backup-files", benchBackupFiles),
    ("backup-incidents", benchBackupIncidents),
    ("sharded-migrate", benchShardedMigrate),
    ("files", benchFiles),
    ("transform", benchTransform),
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
print(machineLine(when: "at start"))
var rows: [BenchRow] = []
var failed: [String] = []
let wanted = only.map { $0.split(separator: ",").map(String.init) }
for bench in benches where wanted.map({ $0.contains { bench.name.contains($0) } }) ?? true {
    FileHandle.standardError.write(Data("bench: \(bench.name)…\n".utf8))
    // A bench that fails is named with its error; the others still run, and every row measured is kept.
    do {
        let measured = try await bench.run(context)
        rows += measured
        print(BenchReport.table(measured))
        // Out at once, so the rows measured before a later failure or a kill are never lost in a buffer.
        fflush(nil)
    } catch {
        failed.append(bench.name)
        print("bench \(bench.name) failed: \(error)")
        fflush(nil)
    }
}
// Again at the end: a load that rose while the benches ran says the figures met other work too.
print(machineLine(when: "at end"))
print(BenchReport.table(rows))
try BenchReport.write(rows, to: jsonPath)
print("written to \(jsonPath); compare a later run with: make bench-compare OLD=\(jsonPath)")
if !failed.isEmpty {
    print("failed: \(failed.joined(separator: ", ")) (their errors are above)")
    exit(1)
}

/// The machine the figures come from: cores, memory, and the load average `when` (now), with a warning when other
/// work keeps more cores busy than there are (the ratios then say more about that work than about either side).
func machineLine(when: String) -> String {
    let cores = ProcessInfo.processInfo.activeProcessorCount
    let memory = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
    var loads = [Double](repeating: 0, count: 3)
    let read = getloadavg(&loads, 3)
    var line = String(format: "machine: %d cores, %.0f GiB", cores, memory)
    guard read == 3 else { return line + "; load average \(when) unknown" }
    line += String(format: ", load average \(when) %.2f %.2f %.2f (1, 5, 15 min)", loads[0], loads[1], loads[2])
    if loads[0] > Double(cores) {
        line += String(
            format: "\nbench: warning: the load (%.2f) is above the %d cores: other work is running, so these figures "
                + "are not comparable with a quiet machine's", loads[0], cores)
    }
    return line
}
