import Foundation

/// A migrate of 20,000 JSON values from a directory to a directory that reshapes each with a jq `transform`.
///
/// `CLOUDSYNC_BENCH_FILES` sets the count. It runs beside the same migrate without one, and beside `jq -c` running the program
/// over the same values in one process (one value per line): what the sandboxed per-value transform adds, against
/// jq doing the same work the fastest way it can. Each side is a child process under GNU `time`.
func benchTransform(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("jq") else {
        print("transform: skipped (needs jq: apt-get install jq)")
        return []
    }
    let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 20_000
    let root = try context.directory("transform")
    let program = "{appearance: {theme: .theme}, id: .n, tags: (.tags | map(ascii_upcase))}"
    try writeValues(count, into: root)
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    var plain: [ChildRun] = []
    var shaped: [ChildRun] = []
    var jq: [ChildRun] = []
    for run in 0..<context.runs {
        // Fresh destinations every run, removed only at the end: ext4 is slow to create files in the inodes a tree
        // removed seconds before had (see MigrateBenches.swift).
        let pipeline = try transformPipeline(in: root, run: run, program: program)
        plain.append(try runChild(executable, ["--pipeline-child", pipeline, "--job", "plain"]))
        shaped.append(try runChild(executable, ["--pipeline-child", pipeline, "--job", "shaped"]))
        jq.append(try runChild("/usr/bin/jq", ["-c", program, root + "/values.jsonl"]))
        print(
            String(
                format: "  run %d: migrate %.2f s CPU, with the transform %.2f s CPU, jq -c %.2f s CPU", run + 1,
                plain[run].cpuSeconds, shaped[run].cpuSeconds, jq[run].cpuSeconds))
    }
    try context.shell("rm -rf '\(root)'")
    let shapedCPU = median(shaped.map(\.cpuSeconds))
    let plainCPU = median(plain.map(\.cpuSeconds))
    let measure = "migrate \(count.formatted()) JSON values directory → directory with a jq transform"
    return [
        BenchRow(
            measure: measure + ": CPU", unit: "s", ours: shapedCPU, peerName: "the same migrate without it",
            peer: plainCPU, target: nil, runs: context.runs),
        BenchRow(
            measure: measure + ": the transform's CPU (with − without)", unit: "s", ours: shapedCPU - plainCPU,
            peerName: "jq -c over the same values", peer: median(jq.map(\.cpuSeconds)), target: .atMost(2.0),
            runs: context.runs),
        BenchRow(
            measure: measure + ": wall", unit: "s", ours: median(shaped.map(\.seconds)),
            peerName: "the same migrate without it", peer: median(plain.map(\.seconds)), target: nil,
            runs: context.runs),
    ]
}

/// `count` JSON values as files in `root/source`, and the same values one per line in `root/values.jsonl`.
private func writeValues(_ count: Int, into root: String) throws {
    try FileManager.default.createDirectory(atPath: root + "/source", withIntermediateDirectories: true)
    var lines = ""
    for index in 0..<count {
        let value = #"{"theme":"theme-\#(index % 7)","n":\#(index),"tags":["a","b\#(index % 13)"]}"#
        try value.write(
            toFile: String(format: "%@/source/settings.item.%06d", root, index), atomically: false,
            encoding: .utf8)
        lines += value + "\n"
    }
    try lines.write(toFile: root + "/values.jsonl", atomically: true, encoding: .utf8)
}

/// A pipeline of two migrates of `root/source` for run `run`: `plain` copies, `shaped` copies through `program`.
private func transformPipeline(in root: String, run: Int, program: String) throws -> String {
    let path = "\(root)/transform-\(run).yaml"
    try """
    version: 1
    name: transform
    providers:
      files: { type: directory, path: \(root)/source }
      plain: { type: directory, path: \(root)/plain-\(run), create: true }
      shaped: { type: directory, path: \(root)/shaped-\(run), create: true }
    store: { providers: [files] }
    jobs:
      - { type: migrate, name: plain, from: files, to: plain }
      - { type: migrate, name: shaped, from: files, to: shaped, transform: '\(program)' }

    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}
