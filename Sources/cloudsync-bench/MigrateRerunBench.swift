import CloudSync
import CloudSyncLocal
import CloudSyncTesting
import Foundation

/// A scheduled `migrate` run again with nothing changed, beside `rclone copy` run again: a directory into a directory
/// (20,000 files of 1 KB) and into a bucket of moto's S3 server (2,000 files), each tool's CPU as GNU time reports it
/// for the whole process, and the requests our run sent to S3.
///
/// Both tools made their copies in an untimed first run; the figures are of the runs after it. Every source and
/// destination file is older than a directory's racy window (two seconds) before the timed runs, as on a real night.
func benchMigrateRerun(_ context: BenchContext) async throws -> [BenchRow] {
    guard context.has("rclone") else {
        print("migrate re-run: skipped (needs rclone: apt-get install rclone)")
        return []
    }
    let executable = Bundle.main.executablePath ?? CommandLine.arguments[0]
    var rows = try await directoryRerun(context, executable: executable)
    guard
        let moto = try? MotoS3Server(
            repository: FileManager.default.currentDirectoryPath, buckets: ["bench-rerun", "bench-rerun-rclone"])
    else {
        print("migrate re-run to S3: skipped (needs .build/pyenv from scripts/python-env.sh)")
        return rows
    }
    defer { moto.stop() }
    rows += try await s3Rerun(context, executable: executable, endpoint: moto.endpoint)
    return rows
}

/// A tree of `count` files of 1 KB under a fresh `name` directory of the scratch space.
private func rerunSource(_ context: BenchContext, _ name: String, count: Int) async throws -> String {
    let root = try context.directory(name)
    let source = try DirectoryProvider(id: "files", root: root)
    let kilobyte = String(repeating: "k", count: 1024)
    for start in stride(from: 0, to: count, by: 500) {
        _ = try await source.set(
            (start..<min(start + 500, count)).map { KeyValue(String(format: "settings.item.%06d", $0), kilobyte) })
    }
    await source.close()
    return root
}

/// Writes a pipeline `name` migrating `files` into the provider `destination` describes, in `directory`.
private func rerunPipeline(_ directory: String, name: String, files: String, destination: String) throws -> String {
    let path = "\(directory)/\(name).yaml"
    try """
    version: 1
    name: \(name)
    providers:
      files: { type: directory, path: \(files) }
      copy: \(destination)
    store: { providers: [files] }
    jobs:
      - { type: migrate, name: nightly, from: files, to: copy }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

private func directoryRerun(_ context: BenchContext, executable: String) async throws -> [BenchRow] {
    let count = ProcessInfo.processInfo.environment["CLOUDSYNC_BENCH_FILES"].flatMap(Int.init) ?? 20_000
    let files = try await rerunSource(context, "rerun-source", count: count)
    let root = try context.directory("rerun-dir")
    let pipeline = try rerunPipeline(
        root, name: "rerun-dir", files: files, destination: "{ type: directory, path: \(root)/ours, create: true }")
    let rclone = ["/usr/bin/rclone", "copy", files, "\(root)/rclone"]
    _ = try runChild(executable, ["--pipeline-child", pipeline])
    _ = try runChild("/usr/bin/env", ["RCLONE_CONFIG=/dev/null"] + rclone)
    sync()
    try await Task.sleep(for: .seconds(2.5))
    var ours: [ChildRun] = []
    var peer: [ChildRun] = []
    for _ in 0..<context.runs {
        ours.append(try runChild(executable, ["--pipeline-child", pipeline]))
        peer.append(try runChild("/usr/bin/env", ["RCLONE_CONFIG=/dev/null"] + rclone))
    }
    let measure = "migrate re-run, nothing changed, \(count.formatted()) × 1 KB directory → directory: CPU"
    print(
        String(
            format: "  directory re-run: ours %.2f s CPU (%.2f s wall), rclone copy %.2f s CPU (%.2f s wall)",
            median(ours.map(\.cpuSeconds)), median(ours.map(\.seconds)), median(peer.map(\.cpuSeconds)),
            median(peer.map(\.seconds))))
    try context.shell("rm -rf '\(root)' '\(files)'")
    return [
        BenchRow(
            measure: measure, unit: "s", ours: median(ours.map(\.cpuSeconds)), peerName: "rclone copy",
            peer: median(peer.map(\.cpuSeconds)), target: .atMost(1.0), runs: context.runs)
    ]
}

private func s3Rerun(_ context: BenchContext, executable: String, endpoint: URL) async throws -> [BenchRow] {
    let count = 2_000
    let files = try await rerunSource(context, "rerun-s3-source", count: count)
    let root = try context.directory("rerun-s3")
    setenv("AWS_ACCESS_KEY_ID", "bench", 1)
    setenv("AWS_SECRET_ACCESS_KEY", "bench", 1)
    let pipeline = try rerunPipeline(
        root, name: "rerun-s3", files: files,
        destination: "{ type: s3, bucket: bench-rerun, endpoint: \"\(endpoint.absoluteString)\", region: us-east-1 }")
    // rclone's cheapest way to see nothing changed: the listing's MD5 (the ETag), with no HEAD per object.
    let rclone = [
        "/bin/sh", "-c",
        "\(rcloneOnMoto(endpoint)) rclone copy --checksum --fast-list --transfers 16 '\(files)' moto:bench-rerun-rclone",
    ]
    _ = try runChild(executable, ["--pipeline-child", pipeline])
    _ = try runChild(rclone[0], Array(rclone.dropFirst()))
    try await Task.sleep(for: .seconds(2.5))
    var ours: [ChildRun] = []
    var peer: [ChildRun] = []
    var requests: [Double] = []
    var writes: [Double] = []
    for _ in 0..<context.runs {
        let run = try runChild(executable, ["--pipeline-child", pipeline, "--print-report"])
        ours.append(run)
        let sent = bucketRequests(in: run.output)
        requests.append(Double(sent.values.reduce(0, +)))
        writes.append(
            Double(sent.filter { ["PUT", "POST", "DELETE"].contains($0.key.prefix { $0 != " " }) }.values.reduce(0, +)))
        peer.append(try runChild(rclone[0], Array(rclone.dropFirst())))
    }
    print(
        String(
            format: "  S3 re-run: ours %.2f s CPU, %.0f requests, %.0f writes; rclone copy --checksum %.2f s CPU",
            median(ours.map(\.cpuSeconds)), median(requests), median(writes), median(peer.map(\.cpuSeconds))))
    try context.shell("rm -rf '\(root)' '\(files)'")
    let measure = "migrate re-run, nothing changed, 2,000 × 1 KB directory → S3 (moto)"
    return [
        BenchRow(
            measure: measure + ": CPU", unit: "s", ours: median(ours.map(\.cpuSeconds)),
            peerName: "rclone copy --checksum", peer: median(peer.map(\.cpuSeconds)), target: .atMost(1.0),
            runs: context.runs),
        BenchRow(
            measure: measure + ": requests", unit: "requests", ours: median(requests), peerName: "budget",
            peer: 3, target: .atMost(1.0), runs: context.runs),
    ]
}

/// The S3 provider's HTTP requests by method and outcome in a run report's JSON (`copy`'s `httpRequests`).
private func bucketRequests(in report: String) -> [String: Int] {
    guard let json = try? JSONSerialization.jsonObject(with: Data(report.utf8)) as? [String: Any],
        let providers = json["providers"] as? [[String: Any]],
        let copy = providers.first(where: { $0["id"] as? String == "copy" })
    else { return [:] }
    return copy["httpRequests"] as? [String: Int] ?? [:]
}
